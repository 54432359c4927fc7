// The register-blocked micro-kernel, written once over a small "vector
// traits" type (load / broadcast / fma / add / store). Each microkernel_*.cpp
// includes this after choosing its instruction set with a target pragma (GCC's, or Clang's attribute pragma)
// and defines the traits with that set's intrinsics. Everything here has
// internal linkage so the differently-compiled copies never mix.
#pragma once

#include <cstdint>

namespace mylinearops::cpu {
namespace {

// [book:cpu-microkernel]
// MR rows x NV vectors of C live in registers for the whole k loop: each step
// loads NV vectors of B, broadcasts MR scalars of A and issues MR * NV fused
// multiply-adds. With AVX2 and float: 6 x 2 ymm accumulators (6 x 16
// floats), 2 loads of B + 6 broadcasts per 12 FMAs; with AVX-512, 12 x 2 zmm
// (12 x 32 floats), 2 loads + 12 broadcasts per 24 FMAs.
// Element (i, p) of A is a[i * a_rs + p * a_cs]: a packed panel (a_rs = 1,
// a_cs = MR) or A in place. The packed case, and a column-major A (a_rs = 1),
// are compiled separately with what is known of their strides, so that the
// MR addresses of a step are constant offsets.
enum ALayout { kAStrided, kAPacked, kAColumnMajor };

// A vector at p; with kPartial only its first n lanes (the rest read as zero).
template <typename Vt, bool kPartial>
inline typename Vt::V load_lanes(const typename Vt::T* p, int n) {
  if constexpr (kPartial) {
    return Vt::load_first(p, n);
  } else {
    return Vt::load(p);
  }
}

#if defined(__GNUC__)
#define MYLINEAROPS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MYLINEAROPS_ALWAYS_INLINE inline
#endif

// One k step: NV vectors of B, MR broadcasts of A, MR * NV FMAs.
template <typename Vt, int MR, int NV, bool kPartial>
MYLINEAROPS_ALWAYS_INLINE void fma_step(
    typename Vt::V (&acc)[MR][NV], const typename Vt::T* a, int64_t a_rs, const typename Vt::T* b, int cols) {
  using V = typename Vt::V;
  constexpr int W = Vt::kWidth;
  V bv[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bv[v] = load_lanes<Vt, kPartial>(b + v * W, cols - v * W);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const V av = Vt::broadcast(a + i * a_rs);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = Vt::fmadd(av, bv[v], acc[i][v]);
  }
}

// kPartial: only the first `cols` columns of B, bias and C are touched, through
// the traits' masked loads and stores (a vector wholly past `cols` is
// computed from zeros and never stored). The arithmetic is the same.
// `next`: the first next.lines steps each also pull a cache line toward L2
// (a loop of their own, so the other steps carry no test).
template <typename Vt, int MR, int NV, ALayout kA, bool kPartial>
inline void microkernel_body(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate,
    L2Prefetch next, int cols) {
  using V = typename Vt::V;
  constexpr int W = Vt::kWidth;
  if constexpr (kA == kAPacked) a_rs = 1, a_cs = MR;
  if constexpr (kA == kAColumnMajor) a_rs = 1;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = Vt::zero();

#if defined(__GNUC__)
  // The tile of C is stored (and with `accumulate` read) only after the k
  // loop: fetch its lines into L1 now, so that those stores do not queue
  // behind misses at the end. A weight gradient's short k leaves little
  // time for that to hide in.
  const int64_t tile_bytes = static_cast<int64_t>(kPartial ? cols : NV * W) * sizeof(typename Vt::T);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const uintptr_t row = reinterpret_cast<uintptr_t>(c + i * ldc);
    for (uintptr_t line = row / kCacheLineBytes * kCacheLineBytes; line < row + tile_bytes; line += kCacheLineBytes) {
      __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3); // prefetcht0
    }
  }
#endif
  const int64_t prefetch_steps = next.lines < kc ? next.lines : kc;
  const char* line = static_cast<const char*>(next.begin);
  int64_t p = 0;
  for (; p < prefetch_steps; ++p) {
#if defined(__GNUC__)
    __builtin_prefetch(line, 0, 2); // read, into L2 (prefetcht1)
#endif
    line += kCacheLineBytes;
    fma_step<Vt, MR, NV, kPartial>(acc, a, a_rs, b, cols);
    a += a_cs;
    b += b_rs;
  }
#pragma GCC unroll 4
  for (; p < kc; ++p) {
    fma_step<Vt, MR, NV, kPartial>(acc, a, a_rs, b, cols);
    a += a_cs;
    b += b_rs;
  }

#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    typename Vt::T* ci = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      V out = acc[i][v];
      if (accumulate) {
        out = Vt::add(out, load_lanes<Vt, kPartial>(ci + v * W, cols - v * W));
      } else if (bias != nullptr) {
        out = Vt::add(out, load_lanes<Vt, kPartial>(bias + v * W, cols - v * W));
      }
      if constexpr (kPartial) {
        Vt::store_first(ci + v * W, out, cols - v * W);
      } else {
        Vt::store(ci + v * W, out);
      }
    }
  }
}

template <typename Vt, int MR, int NV, bool kPartial>
void dispatch_layout(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, L2Prefetch next,
    int cols) {
  if (a_rs == 1 && a_cs == MR) {
    microkernel_body<Vt, MR, NV, kAPacked, kPartial>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, cols);
  } else if (a_rs == 1) { // A column-major, read in place (a weight gradient's X^T)
    microkernel_body<Vt, MR, NV, kAColumnMajor, kPartial>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, cols);
  } else {
    microkernel_body<Vt, MR, NV, kAStrided, kPartial>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, cols);
  }
}

template <typename Vt, int MR, int NV>
void microkernel(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, L2Prefetch next) {
  dispatch_layout<Vt, MR, NV, false>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, NV * Vt::kWidth);
}

// The first `cols` columns of the tile (MicroKernelColsFn), for traits with
// masked loads and stores.
template <typename Vt, int MR, int NV>
void microkernel_partial(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, L2Prefetch next,
    int cols) {
  dispatch_layout<Vt, MR, NV, true>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, cols);
}
// [/book:cpu-microkernel]

// [book:cpu-fma-peak-loop]
// The compute ceiling, measured: kChains independent chains of
// acc = acc * x + y. An FMA takes about 4 cycles and a core starts up to 2 per
// cycle, so at least 8 chains must be in flight; 12 leave a margin and still
// fit in 16 registers with x and y. No loads, no stores: only the FMA units
// limit this loop. (The portable kernel has no FMA instruction: a multiply
// and an add, counted as 2 FLOPs like one FMA.)
template <typename Vt, int kChains>
typename Vt::T fma_peak_loop(int64_t iterations, typename Vt::T x, typename Vt::T y) {
  using V = typename Vt::V;
  V acc[kChains];
  const V vx = Vt::broadcast(&x), vy = Vt::broadcast(&y);
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) { // distinct starting values: identical chains would be merged by the compiler
    const typename Vt::T start = y * static_cast<typename Vt::T>(c + 1);
    acc[c] = Vt::broadcast(&start);
  }
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = Vt::fmadd(acc[c], vx, vy);
  }
  V sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = Vt::add(sum, acc[c]);
  typename Vt::T lanes[Vt::kWidth];
  Vt::store(lanes, sum);
  typename Vt::T total = 0;
  for (int l = 0; l < Vt::kWidth; ++l) total += lanes[l];
  return total;
}
constexpr int kFmaChains = 12;
// [/book:cpu-fma-peak-loop]

} // namespace
} // namespace mylinearops::cpu
