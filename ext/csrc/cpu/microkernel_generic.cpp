// Portable micro-kernels: GCC/Clang vector extensions with 16-byte vectors
// (SSE2 on any x86-64, NEON on arm64). The fallback when neither AVX2 nor
// AVX-512 is available, and a baseline for the book's comparisons.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "microkernel.h"
#include "microkernel_impl.h"

namespace mylinearops::cpu {
namespace {

template <typename Scalar>
struct GenericVec {
  using T = Scalar;
  typedef Scalar V __attribute__((vector_size(16)));
  static constexpr int kWidth = 16 / sizeof(Scalar);
  static V zero() { return V{}; }
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V)); // unaligned load
    return v;
  }
  // A load and a shuffle. (`V{} + *p` would also add 0.0: an FP add per broadcast, which
  // the compiler may not drop, as -0.0 + 0.0 is +0.0.)
  static V broadcast(const T* p) {
    const V v{*p};
#if defined(__clang__)
    if constexpr (kWidth == 4) {
      return __builtin_shufflevector(v, v, 0, 0, 0, 0);
    } else {
      return __builtin_shufflevector(v, v, 0, 0);
    }
#else // GCC: __builtin_shufflevector only from GCC 12; __builtin_shuffle since 4.7
    typedef std::conditional_t<sizeof(Scalar) == 4, int32_t, int64_t> Index __attribute__((vector_size(16)));
    return __builtin_shuffle(v, Index{}); // every lane takes element 0
#endif
  }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V add(V a, V b) { return a + b; }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof(V)); }
};

// 16 xmm registers: 6 x 2 accumulators + 2 B vectors + 1 broadcast.
constexpr MicroKernel<float> kF32{"generic", 6, 8, &microkernel<GenericVec<float>, 6, 2>};
constexpr MicroKernel<double> kF64{"generic", 6, 4, &microkernel<GenericVec<double>, 6, 2>};
constexpr FmaLoop kFmaLoop{"generic", kFmaChains * GenericVec<float>::kWidth * 2, &fma_peak_loop<GenericVec<float>, kFmaChains>};

} // namespace

const MicroKernel<float>* generic_kernel_f32() { return &kF32; }
const MicroKernel<double>* generic_kernel_f64() { return &kF64; }
const FmaLoop* generic_fma_loop() { return &kFmaLoop; }

} // namespace mylinearops::cpu
