// AVX2+FMA micro-kernels. Only this file is compiled for AVX2 (via the
// target pragma of GCC or Clang), so the library still loads and runs on CPUs without it;
// matmul_cpu.cpp picks a kernel at run time with __builtin_cpu_supports.
#include "microkernel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h> // its intrinsics carry their own target attributes

#if defined(__clang__) // Clang ignores GCC's target pragma; this is its equivalent
#pragma clang attribute push(__attribute__((target("avx2,fma,prfchw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,prfchw")
#endif

#include "microkernel_impl.h"

namespace mylinearops::cpu {
namespace {

struct Avx2F32 {
  using T = float;
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static V broadcast(const T* p) { return _mm256_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
};

struct Avx2F64 {
  using T = double;
  using V = __m256d;
  static constexpr int kWidth = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static V broadcast(const T* p) { return _mm256_set1_pd(*p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
};

// 16 ymm registers: 6 x 2 accumulators + 2 B vectors + 1 broadcast.
constexpr MicroKernel<float> kF32{"avx2", 6, 16, &microkernel<Avx2F32, 6, 2>};
constexpr MicroKernel<double> kF64{"avx2", 6, 8, &microkernel<Avx2F64, 6, 2>};
constexpr FmaLoop kFmaLoop{"avx2", kFmaChains * Avx2F32::kWidth * 2, &fma_peak_loop<Avx2F32, kFmaChains>};

} // namespace
} // namespace mylinearops::cpu
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace mylinearops::cpu {
const MicroKernel<float>* avx2_kernel_f32() { return &kF32; }
const MicroKernel<double>* avx2_kernel_f64() { return &kF64; }
const FmaLoop* avx2_fma_loop() { return &kFmaLoop; }
} // namespace mylinearops::cpu

#else // not x86-64 with GCC/Clang: no AVX2 kernels in this build

namespace mylinearops::cpu {
const MicroKernel<float>* avx2_kernel_f32() { return nullptr; }
const MicroKernel<double>* avx2_kernel_f64() { return nullptr; }
const FmaLoop* avx2_fma_loop() { return nullptr; }
} // namespace mylinearops::cpu

#endif
