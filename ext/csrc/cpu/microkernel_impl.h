// The register-blocked micro-kernel, written once over a small "vector
// traits" type (load / broadcast / fma / add / store). Each microkernel_*.cpp
// includes this after choosing its instruction set with `#pragma GCC target`
// and defines the traits with that set's intrinsics. Everything here has
// internal linkage so the differently-compiled copies never mix.
#pragma once

#include <cstdint>

namespace mylinearops::cpu {
namespace {

// [book:cpu-microkernel]
// MR rows x NV vectors of C live in registers for the whole k loop: each step
// loads NV vectors of B, broadcasts MR scalars of A and issues MR * NV fused
// multiply-adds. With AVX-512 and float: 12 x 2 zmm accumulators (12 x 32
// floats), 2 loads of B + 12 broadcasts per 24 FMAs.
template <typename Vt, int MR, int NV>
void microkernel(
    int64_t kc, const typename Vt::T* a, const typename Vt::T* b, typename Vt::T* c,
    int64_t ldc, const typename Vt::T* bias, bool accumulate) {
  using V = typename Vt::V;
  constexpr int W = Vt::kWidth;
  constexpr int NR = NV * W;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = Vt::zero();

  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Vt::load(b + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V av = Vt::broadcast(a + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = Vt::fmadd(av, bv[v], acc[i][v]);
    }
    a += MR;
    b += NR;
  }

#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    typename Vt::T* ci = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      V out = acc[i][v];
      if (accumulate) {
        out = Vt::add(out, Vt::load(ci + v * W));
      } else if (bias != nullptr) {
        out = Vt::add(out, Vt::load(bias + v * W));
      }
      Vt::store(ci + v * W, out);
    }
  }
}
// [/book:cpu-microkernel]

} // namespace
} // namespace mylinearops::cpu
