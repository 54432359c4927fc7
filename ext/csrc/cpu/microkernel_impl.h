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

// Vector v of a row of NV vectors. With kPartial the last one holds only its
// first `last` lanes (the rest read as zero, their memory not touched); the
// others are whole.
template <typename Vt, int NV, bool kPartial>
inline typename Vt::V load_vector(const typename Vt::T* row, int v, int last) {
  if constexpr (kPartial) {
    if (v == NV - 1) return Vt::load_first(row + v * Vt::kWidth, last);
  }
  return Vt::load(row + v * Vt::kWidth);
}

template <typename Vt, int NV, bool kPartial>
inline void store_vector(typename Vt::T* row, int v, typename Vt::V value, int last) {
  if constexpr (kPartial) {
    if (v == NV - 1) return Vt::store_first(row + v * Vt::kWidth, value, last);
  }
  Vt::store(row + v * Vt::kWidth, value);
}

#if defined(__GNUC__)
#define MYLINEAROPS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MYLINEAROPS_ALWAYS_INLINE inline
#endif

// Where the MR elements of A of one k step are. Packed and column-major
// panels: one pointer, the rows at constant offsets. A in place with a row
// stride: one pointer per three rows, each serving its row and the next two
// at offsets of a_rs and 2 a_rs elements. With one address per row, 12 rows
// took more general registers than x86-64 has, and GCC reloaded some of them
// from the stack at every step.
template <typename T, int MR, ALayout kA>
struct AStep {
  static constexpr int kPointers = kA == kAStrided ? (MR + 2) / 3 : 1;
  const T* rows[kPointers];
  int64_t rs, cs;
  MYLINEAROPS_ALWAYS_INLINE AStep(const T* a, int64_t a_rs, int64_t a_cs)
      : rs(kA == kAStrided ? a_rs : 1), cs(kA == kAPacked ? MR : a_cs) {
#pragma GCC unroll 8
    for (int g = 0; g < kPointers; ++g) rows[g] = a + 3 * g * rs;
  }
  MYLINEAROPS_ALWAYS_INLINE const T* row(int i) const {
    if constexpr (kA == kAStrided) {
      return rows[i / 3] + (i % 3) * rs;
    } else {
      return rows[0] + i;
    }
  }
  MYLINEAROPS_ALWAYS_INLINE void next() {
#pragma GCC unroll 8
    for (int g = 0; g < kPointers; ++g) rows[g] += cs;
  }
};

// One k step: NV vectors of B, MR broadcasts of A, MR * NV FMAs.
template <typename Vt, int MR, int NV, bool kPartial, ALayout kA>
MYLINEAROPS_ALWAYS_INLINE void fma_step(
    typename Vt::V (&acc)[MR][NV], const AStep<typename Vt::T, MR, kA>& a, const typename Vt::T* b, int last) {
  using V = typename Vt::V;
  V bv[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bv[v] = load_vector<Vt, NV, kPartial>(b, v, last);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const V av = Vt::broadcast(a.row(i));
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = Vt::fmadd(av, bv[v], acc[i][v]);
  }
}

// kPartial: only the first `cols` columns of B, bias and C are touched: the
// last of the NV vectors through the traits' masked loads and stores, which
// cols fills at least in part (microkernel_partial below drops the vectors
// wholly past it). The arithmetic is the same.
// `next`: the first next.lines steps each also pull a cache line toward L2
// (a loop of their own, so the other steps carry no test).
template <typename Vt, int MR, int NV, ALayout kA, bool kPartial>
inline void microkernel_body(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate,
    const L2Prefetch& next, int cols) {
  using V = typename Vt::V;
  constexpr int W = Vt::kWidth;
  const int last = cols - (NV - 1) * W; // lanes of the last vector in use (W unless kPartial)
  AStep<typename Vt::T, MR, kA> a_step(a, a_rs, a_cs);
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = Vt::zero();

#if defined(__GNUC__)
  // The tile of C is stored (and with `accumulate` read) only after the k
  // loop: fetch its lines into L1 now, so that those stores do not queue
  // behind misses at the end. A weight gradient's short k leaves little
  // time for that to hide in. Fetched for writing (PREFETCHW, which the
  // AVX2 and AVX-512 files' targets enable; the portable file fetches for
  // reading): fetched for reading, each line had to be claimed again by its
  // stores, and products that mostly write C (k = 10) ran markedly slower on
  // a Xeon.
  const int64_t tile_bytes = static_cast<int64_t>(kPartial ? cols : NV * W) * sizeof(typename Vt::T);
  // One prefetch per 64 bytes of a row and one at its last byte reach every
  // line it touches, aligned or not, in a count known at compile time for
  // a whole tile: no loop and no branches, which ran faster in a stand-alone
  // timing of the 12 x 32 kernel on an Intel Xeon.
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
#pragma GCC unroll 4
    for (int64_t offset = 0; offset < tile_bytes; offset += kCacheLineBytes) __builtin_prefetch(row + offset, 1, 3);
    __builtin_prefetch(row + tile_bytes - 1, 1, 3); // prefetchw
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
    fma_step<Vt, MR, NV, kPartial>(acc, a_step, b, last);
    a_step.next();
    b += b_rs;
  }
#pragma GCC unroll 4
  for (; p < kc; ++p) {
    fma_step<Vt, MR, NV, kPartial>(acc, a_step, b, last);
    a_step.next();
    b += b_rs;
  }

#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    typename Vt::T* ci = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      V out = acc[i][v];
      if (accumulate) {
        out = Vt::add(out, load_vector<Vt, NV, kPartial>(ci, v, last));
      } else if (bias != nullptr) {
        out = Vt::add(out, load_vector<Vt, NV, kPartial>(bias, v, last));
      }
      store_vector<Vt, NV, kPartial>(ci, v, out, last);
    }
  }
}

template <typename Vt, int MR, int NV, bool kPartial>
void dispatch_layout(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, const L2Prefetch& next,
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
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, const L2Prefetch& next) {
  dispatch_layout<Vt, MR, NV, false>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, NV * Vt::kWidth);
}

// The first `cols` columns of the tile (MicroKernelColsFn), for traits with
// masked loads and stores. Only the vectors that hold any of them are
// computed: a last panel of 16 columns costs 8 x 48 one vector's FMAs per
// row, not three.
template <typename Vt, int MR, int NV>
void microkernel_partial(
    int64_t kc, const typename Vt::T* a, int64_t a_rs, int64_t a_cs, const typename Vt::T* b,
    int64_t b_rs, typename Vt::T* c, int64_t ldc, const typename Vt::T* bias, bool accumulate, const L2Prefetch& next,
    int cols) {
  if constexpr (NV > 1) {
    if (cols <= (NV - 1) * Vt::kWidth) {
      return microkernel_partial<Vt, MR, NV - 1>(kc, a, a_rs, a_cs, b, b_rs, c, ldc, bias, accumulate, next, cols);
    }
  }
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
