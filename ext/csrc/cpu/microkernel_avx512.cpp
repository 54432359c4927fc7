// AVX-512 micro-kernels. Only this file is compiled for AVX-512 (via the
// target pragma of GCC or Clang), so the library still loads and runs on CPUs without it;
// matmul_cpu.cpp picks a kernel at run time with __builtin_cpu_supports.
#include "microkernel.h"

#if defined(MYLINEAROPS_AVX512_VIA_SIMDE)
// Test builds only (make test-avx512-emulated): the same traits and tiles, with
// the AVX-512 intrinsics implemented by SIMDe in portable code, so that the
// 12 x 32 tile runs, and is tested, on CPUs without AVX-512. It checks this
// file and the driver's handling of its tile; the real build's codegen and
// CPU detection still need an AVX-512 CPU.
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define MYLINEAROPS_AVX512_KERNELS
#elif defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h> // its intrinsics carry their own target attributes
#define MYLINEAROPS_AVX512_KERNELS
#endif

#if defined(MYLINEAROPS_AVX512_KERNELS)
// [book:cpu-avx512-target]
#if defined(MYLINEAROPS_AVX512_VIA_SIMDE) // a test build: no AVX-512 instructions at all
#elif defined(__clang__) // Clang ignores GCC's target pragma; this is its equivalent
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma,prfchw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,prfchw")
#endif

#include "microkernel_impl.h"

namespace mylinearops::cpu {
namespace {

// The lanes [0, n) of a vector of `width` lanes, as a mask (n may be <= 0 or >= width).
// Without branches, so that the compiler computes a loop's mask once, before the loop.
inline unsigned first_lanes(int n, int width) {
  const int lanes = n < 0 ? 0 : n > width ? width : n;
  return static_cast<unsigned>((uint64_t{1} << lanes) - 1);
}

// Masked loads (the lanes past n read as zero, and their memory is not
// touched) and masked stores (only lanes [0, n) are written).
#if defined(MYLINEAROPS_AVX512_VIA_SIMDE) // SIMDe 0.7 has no masked loads or stores: through a buffer
template <typename T, typename V, V (*Load)(const T*), void (*Store)(T*, V), int W>
struct FirstLanes {
  static V load(const T* p, int n) {
    T lanes[W] = {};
    for (int i = 0; i < n && i < W; ++i) lanes[i] = p[i];
    return Load(lanes);
  }
  static void store(T* p, V v, int n) {
    T lanes[W];
    Store(lanes, v);
    for (int i = 0; i < n && i < W; ++i) p[i] = lanes[i];
  }
};
inline __m512 load_f32(const float* p) { return _mm512_loadu_ps(p); }
inline void store_f32(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline __m512d load_f64(const double* p) { return _mm512_loadu_pd(p); }
inline void store_f64(double* p, __m512d v) { _mm512_storeu_pd(p, v); }
using FirstLanesF32 = FirstLanes<float, __m512, load_f32, store_f32, 16>;
using FirstLanesF64 = FirstLanes<double, __m512d, load_f64, store_f64, 8>;
#else
struct FirstLanesF32 {
  static __m512 load(const float* p, int n) { return _mm512_maskz_loadu_ps(first_lanes(n, 16), p); }
  static void store(float* p, __m512 v, int n) { _mm512_mask_storeu_ps(p, first_lanes(n, 16), v); }
};
struct FirstLanesF64 {
  static __m512d load(const double* p, int n) { return _mm512_maskz_loadu_pd(first_lanes(n, 8), p); }
  static void store(double* p, __m512d v, int n) { _mm512_mask_storeu_pd(p, first_lanes(n, 8), v); }
};
#endif

struct Avx512F32 {
  using T = float;
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static V load_first(const T* p, int n) { return FirstLanesF32::load(p, n); }
  static V broadcast(const T* p) { return _mm512_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_first(T* p, V v, int n) { FirstLanesF32::store(p, v, n); }
};

struct Avx512F64 {
  using T = double;
  using V = __m512d;
  static constexpr int kWidth = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static V load_first(const T* p, int n) { return FirstLanesF64::load(p, n); }
  static V broadcast(const T* p) { return _mm512_set1_pd(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
  static void store_first(T* p, V v, int n) { FirstLanesF64::store(p, v, n); }
};

// 32 zmm registers: 12 x 2 accumulators + 2 B vectors + 1 broadcast. Every
// AVX-512 tile has a masked twin for a ragged last panel of columns, which
// computes only the vectors that hold some of them: C no wider than one
// vector (the MLP's 10 classes) costs one vector's FMAs per row.
constexpr MicroKernel<float> kF32{"avx512", 12, 32, &microkernel<Avx512F32, 12, 2>,
                                  &microkernel_partial<Avx512F32, 12, 2>, Avx512F32::kWidth};
constexpr MicroKernel<double> kF64{"avx512", 12, 16, &microkernel<Avx512F64, 12, 2>,
                                   &microkernel_partial<Avx512F64, 12, 2>, Avx512F64::kWidth};
// Three vectors per row: 8 x 3 accumulators + 3 B vectors + 1 broadcast. Per k
// step 3 loads and 8 broadcasts feed 24 FMAs (12 x 32: 2 loads, 12 broadcasts),
// so fewer load slots per FMA; the tuning search (tuning.cpp) measures which
// of the two is faster on the running CPU.
constexpr MicroKernel<float> kF32Tile8x48{"avx512", 8, 48, &microkernel<Avx512F32, 8, 3>,
                                           &microkernel_partial<Avx512F32, 8, 3>, Avx512F32::kWidth};
constexpr FmaLoop kFmaLoop{"avx512", kFmaChains * Avx512F32::kWidth * 2, &fma_peak_loop<Avx512F32, kFmaChains>};
// [/book:cpu-avx512-target]

} // namespace
} // namespace mylinearops::cpu
#if defined(MYLINEAROPS_AVX512_VIA_SIMDE)
#elif defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace mylinearops::cpu {
const MicroKernel<float>* avx512_kernel_f32() { return &kF32; }
const MicroKernel<double>* avx512_kernel_f64() { return &kF64; }
const MicroKernel<float>* avx512_kernel_f32_8x48() { return &kF32Tile8x48; }
const FmaLoop* avx512_fma_loop() { return &kFmaLoop; }
} // namespace mylinearops::cpu

#else // not x86-64 with GCC/Clang (and not emulated): no AVX-512 kernels in this build

namespace mylinearops::cpu {
const MicroKernel<float>* avx512_kernel_f32() { return nullptr; }
const MicroKernel<double>* avx512_kernel_f64() { return nullptr; }
const MicroKernel<float>* avx512_kernel_f32_8x48() { return nullptr; }
const FmaLoop* avx512_fma_loop() { return nullptr; }
} // namespace mylinearops::cpu

#endif
