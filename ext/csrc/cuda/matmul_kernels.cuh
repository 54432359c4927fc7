// The CUDA kernels, from the notes' naive kernel to the register-blocked
// one. Device code only: no ATen, no launch code (see matmul_cuda.cu), so
// the file reads top to bottom as the book's progression.
//
// Every kernel computes C (m x n, contiguous) = A @ B (+ bias) from a
// GemmArgs: raw pointers plus strides, so transposed views such as W.t() in
// the backward are read in place, never copied.
#pragma once

#include <cstdint>

#include "../mylinearops.h"

namespace mylinearops::cuda {

// [book:cuda-naive-kernel]
// The notes' kernel: one thread per element of C, 16 x 16 blocks, and
// threadIdx.x walking down the *rows*. A warp is 32 consecutive thread ids
// (threadIdx.x + 16 * threadIdx.y), which here is 16 rows x 2 columns of C,
// so its 32 loads of A hit 16 different rows, k elements apart, and its
// stores to C land n elements apart: each warp access touches ~16 separate
// 32-byte segments instead of one or two. That, not the arithmetic, is why
// it is slow.
constexpr int kNaiveBlock = 16; // 16 x 16 threads, as in the notes

template <typename T>
__global__ void matmul_naive_kernel(GemmArgs<T> g) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t col = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (row < g.m && col < g.n) {
    T acc = 0;
    for (int64_t p = 0; p < g.k; ++p) {
      acc += g.a[row * g.a_stride0 + p * g.a_stride1] * g.b[p * g.b_stride0 + col * g.b_stride1];
    }
    if (g.bias != nullptr) acc += g.bias[col * g.bias_stride];
    g.c[row * g.n + col] = acc;
  }
}
// [/book:cuda-naive-kernel]

// [book:cuda-coalesced-kernel]
// The fix is one line: let threadIdx.x walk the *columns*. With 32 x 8
// blocks a warp is one row of C and 32 consecutive columns. For float and a
// row-major B, its loads of B (row p, columns col..col+31) and its stores to C
// are each 128 contiguous bytes; its loads of A are one broadcast address.
constexpr int kCoalescedBlockX = 32, kCoalescedBlockY = 8; // x: columns, y: rows

template <typename T>
__global__ void matmul_coalesced_kernel(GemmArgs<T> g) {
  const int64_t col = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row < g.m && col < g.n) {
    T acc = 0;
    for (int64_t p = 0; p < g.k; ++p) {
      acc += g.a[row * g.a_stride0 + p * g.a_stride1] * g.b[p * g.b_stride0 + col * g.b_stride1];
    }
    if (g.bias != nullptr) acc += g.bias[col * g.bias_stride];
    g.c[row * g.n + col] = acc;
  }
}
// [/book:cuda-coalesced-kernel]

// [book:cuda-tiled-kernel]
// Shared-memory tiling: a 32 x 32 block of threads computes a 32 x 32 tile
// of C. Each step the block loads a 32 x 32 tile of A and of B into shared
// memory once (coalesced), then every thread reads 32 values of each from
// shared memory. Global traffic drops by the tile width, 32x.
constexpr int kTile = 32;

template <typename T>
__global__ void matmul_tiled_kernel(GemmArgs<T> g) {
  __shared__ T As[kTile][kTile];
  __shared__ T Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kTile + ty;
  const int64_t col = static_cast<int64_t>(blockIdx.y) * kTile + tx;
  T acc = 0;
  for (int64_t p0 = 0; p0 < g.k; p0 += kTile) {
    As[ty][tx] = (row < g.m && p0 + tx < g.k) ? g.a[row * g.a_stride0 + (p0 + tx) * g.a_stride1] : T(0);
    Bs[ty][tx] = (p0 + ty < g.k && col < g.n) ? g.b[(p0 + ty) * g.b_stride0 + col * g.b_stride1] : T(0);
    __syncthreads(); // tiles complete before anyone reads them
#pragma unroll
    for (int p = 0; p < kTile; ++p) acc += As[ty][p] * Bs[p][tx];
    __syncthreads(); // everyone done reading before the next load overwrites
  }
  if (row < g.m && col < g.n) {
    if (g.bias != nullptr) acc += g.bias[col * g.bias_stride];
    g.c[row * g.n + col] = acc;
  }
}
// [/book:cuda-tiled-kernel]

// ---------------------------------------------------------------------------
// The register-blocked kernel.
// ---------------------------------------------------------------------------

// [book:cuda-register-blocked-config]
// A block of 256 threads computes a 128 x 128 tile of C; each thread an 8 x 8
// micro-tile held in registers. Per k step a thread reads 8 values of A and
// 8 of B from shared memory and does 64 FMAs (the tiled kernel: 2 reads per
// FMA). Tiles of A and B (128 x 8 each) are loaded with 16-byte vector loads
// into one half of a double buffer while the other half is being computed on,
// so one __syncthreads per k step suffices and load latency hides behind math.
namespace rb {
constexpr int BM = 128, BN = 128, BK = 8; // block tile
constexpr int TM = 8, TN = 8;             // thread micro-tile
constexpr int HM = TM / 2, HN = TN / 2;   // ... as 2 x 2 sub-tiles of 4 x 4
constexpr int kThreads = (BM / TM) * (BN / TN); // 256
constexpr int kLoadsPerThread = BM * BK / kThreads; // 4 elements of A and of B per tile
static_assert(BM * BK == BN * BK, "A and B tiles hold the same number of elements");
} // namespace rb

// A 16-byte vector of T, for vectorised global and shared memory access.
template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
  using type = float4;
  static constexpr int width = 4;
};
template <>
struct Vec16<double> {
  using type = double2;
  static constexpr int width = 2;
};

// How an operand is laid out, which decides how its tiles are loaded:
// RowMajor: stride 1 along a row (A: along k; B: along n) -> vector loads along the row;
// ColMajor: stride 1 down a column (A = X.t(), B = W.t() in the backward) -> vector loads
//           down the column; Strided: anything else (or misaligned) -> scalar loads.
enum class Layout { RowMajor, ColMajor, Strided };

// [/book:cuda-register-blocked-config]

// [book:cuda-layout-choice]
// Host side: which tile-loading code an operand gets. Vector loads need the
// contiguous dimension to be a multiple of the vector width (so a vector is
// entirely inside or outside the matrix) and every vector to start 16-byte
// aligned; anything else takes the scalar path.
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T>
Layout layout_of_a(const GemmArgs<T>& g) {
  constexpr int W = Vec16<T>::width;
  if (!aligned16(g.a)) return Layout::Strided;
  if (g.a_stride1 == 1 && g.k % W == 0 && g.a_stride0 % W == 0) return Layout::RowMajor;
  if (g.a_stride0 == 1 && g.m % W == 0 && g.a_stride1 % W == 0) return Layout::ColMajor;
  return Layout::Strided;
}

template <typename T>
Layout layout_of_b(const GemmArgs<T>& g) {
  constexpr int W = Vec16<T>::width;
  if (!aligned16(g.b)) return Layout::Strided;
  if (g.b_stride1 == 1 && g.n % W == 0 && g.b_stride0 % W == 0) return Layout::RowMajor;
  if (g.b_stride0 == 1 && g.k % W == 0 && g.b_stride1 % W == 0) return Layout::ColMajor;
  return Layout::Strided;
}
// [/book:cuda-layout-choice]

// [book:cuda-register-blocked-kernel]

// Shared memory rows are padded by 16 bytes: keeps vector alignment and
// spreads the transposing stores (A row-major, B column-major) over all banks.
template <typename T>
struct alignas(16) Smem {
  static constexpr int kPad = Vec16<T>::width;
  T a[2][rb::BK][rb::BM + kPad]; // A tile stored k-major: a[buf][p][i] = A[bm + i, k0 + p]
  T b[2][rb::BK][rb::BN + kPad]; // b[buf][p][j] = B[k0 + p, bn + j]
};

// Loads this thread's share of the A tile at (bm, k0) into registers.
template <typename T, Layout L>
__device__ __forceinline__ void load_a_tile(const GemmArgs<T>& g, int64_t bm, int64_t k0, int tid, T* stage) {
  using V = typename Vec16<T>::type;
  constexpr int W = Vec16<T>::width;
  if constexpr (L == Layout::RowMajor) { // vectors along k
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int64_t row = bm + v / (rb::BK / W), kk = k0 + (v % (rb::BK / W)) * W;
      V val{};
      if (row < g.m && kk < g.k) val = *reinterpret_cast<const V*>(g.a + row * g.a_stride0 + kk);
      *reinterpret_cast<V*>(stage + r * W) = val;
    }
  } else if constexpr (L == Layout::ColMajor) { // vectors along m
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int64_t kk = k0 + v / (rb::BM / W), row = bm + (v % (rb::BM / W)) * W;
      V val{};
      if (row < g.m && kk < g.k) val = *reinterpret_cast<const V*>(g.a + kk * g.a_stride1 + row);
      *reinterpret_cast<V*>(stage + r * W) = val;
    }
  } else { // scalar, consecutive threads along k
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread; ++r) {
      const int e = tid + r * rb::kThreads;
      const int64_t row = bm + e / rb::BK, kk = k0 + e % rb::BK;
      stage[r] = (row < g.m && kk < g.k) ? g.a[row * g.a_stride0 + kk * g.a_stride1] : T(0);
    }
  }
}

// Writes the registers from load_a_tile into shared memory, k-major.
template <typename T, Layout L>
__device__ __forceinline__ void store_a_tile(T (*as)[rb::BM + Smem<T>::kPad], int tid, const T* stage) {
  using V = typename Vec16<T>::type;
  constexpr int W = Vec16<T>::width;
  if constexpr (L == Layout::RowMajor) { // transpose while storing
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int row = v / (rb::BK / W), kk = (v % (rb::BK / W)) * W;
#pragma unroll
      for (int e = 0; e < W; ++e) as[kk + e][row] = stage[r * W + e];
    }
  } else if constexpr (L == Layout::ColMajor) { // already k-major: one vector store
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int kk = v / (rb::BM / W), row = (v % (rb::BM / W)) * W;
      *reinterpret_cast<V*>(&as[kk][row]) = *reinterpret_cast<const V*>(stage + r * W);
    }
  } else {
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread; ++r) {
      const int e = tid + r * rb::kThreads;
      as[e % rb::BK][e / rb::BK] = stage[r];
    }
  }
}

// Loads this thread's share of the B tile at (k0, bn) into registers.
template <typename T, Layout L>
__device__ __forceinline__ void load_b_tile(const GemmArgs<T>& g, int64_t k0, int64_t bn, int tid, T* stage) {
  using V = typename Vec16<T>::type;
  constexpr int W = Vec16<T>::width;
  if constexpr (L == Layout::RowMajor) { // vectors along n
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int64_t kk = k0 + v / (rb::BN / W), col = bn + (v % (rb::BN / W)) * W;
      V val{};
      if (kk < g.k && col < g.n) val = *reinterpret_cast<const V*>(g.b + kk * g.b_stride0 + col);
      *reinterpret_cast<V*>(stage + r * W) = val;
    }
  } else if constexpr (L == Layout::ColMajor) { // vectors along k
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int64_t col = bn + v / (rb::BK / W), kk = k0 + (v % (rb::BK / W)) * W;
      V val{};
      if (kk < g.k && col < g.n) val = *reinterpret_cast<const V*>(g.b + col * g.b_stride1 + kk);
      *reinterpret_cast<V*>(stage + r * W) = val;
    }
  } else { // scalar, consecutive threads along n
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread; ++r) {
      const int e = tid + r * rb::kThreads;
      const int64_t kk = k0 + e / rb::BN, col = bn + e % rb::BN;
      stage[r] = (kk < g.k && col < g.n) ? g.b[kk * g.b_stride0 + col * g.b_stride1] : T(0);
    }
  }
}

template <typename T, Layout L>
__device__ __forceinline__ void store_b_tile(T (*bs)[rb::BN + Smem<T>::kPad], int tid, const T* stage) {
  using V = typename Vec16<T>::type;
  constexpr int W = Vec16<T>::width;
  if constexpr (L == Layout::RowMajor) {
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int kk = v / (rb::BN / W), col = (v % (rb::BN / W)) * W;
      *reinterpret_cast<V*>(&bs[kk][col]) = *reinterpret_cast<const V*>(stage + r * W);
    }
  } else if constexpr (L == Layout::ColMajor) { // transpose while storing
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread / W; ++r) {
      const int v = tid + r * rb::kThreads;
      const int col = v / (rb::BK / W), kk = (v % (rb::BK / W)) * W;
#pragma unroll
      for (int e = 0; e < W; ++e) bs[kk + e][col] = stage[r * W + e];
    }
  } else {
#pragma unroll
    for (int r = 0; r < rb::kLoadsPerThread; ++r) {
      const int e = tid + r * rb::kThreads;
      bs[e / rb::BN][e % rb::BN] = stage[r];
    }
  }
}

// Fewer registers per thread for float lets two blocks share an SM; the
// double version needs 128 registers for its accumulators alone.
template <typename T>
struct MinBlocksPerSm {
  static constexpr int value = sizeof(T) == 4 ? 2 : 1;
};

template <typename T, Layout LA, Layout LB>
__global__ void __launch_bounds__(rb::kThreads, MinBlocksPerSm<T>::value)
    matmul_register_blocked_kernel(GemmArgs<T> g) {
  using V = typename Vec16<T>::type;
  constexpr int W = Vec16<T>::width;
  __shared__ Smem<T> smem;

  const int tid = threadIdx.x;
  // This thread's rows: ty*4 + {0..3} and 64 + ty*4 + {0..3} of the tile
  // (columns likewise with tx). Splitting the 8 x 8 micro-tile into four
  // 4 x 4 pieces makes a warp's 16-byte shared-memory reads of B contiguous.
  const int tx = tid % (rb::BN / rb::TN), ty = tid / (rb::BN / rb::TN);
  const int64_t bm = static_cast<int64_t>(blockIdx.x) * rb::BM;
  const int64_t bn = static_cast<int64_t>(blockIdx.y) * rb::BN;

  T acc[rb::TM][rb::TN];
#pragma unroll
  for (int i = 0; i < rb::TM; ++i)
#pragma unroll
    for (int j = 0; j < rb::TN; ++j) acc[i][j] = T(0);

  // alignas: these register arrays are also read and written as 16-byte vectors.
  alignas(16) T stage_a[rb::kLoadsPerThread];
  alignas(16) T stage_b[rb::kLoadsPerThread];
  load_a_tile<T, LA>(g, bm, 0, tid, stage_a);
  load_b_tile<T, LB>(g, 0, bn, tid, stage_b);
  store_a_tile<T, LA>(smem.a[0], tid, stage_a);
  store_b_tile<T, LB>(smem.b[0], tid, stage_b);
  __syncthreads();

  const int64_t num_k_tiles = (g.k + rb::BK - 1) / rb::BK;
  for (int64_t t = 0; t < num_k_tiles; ++t) {
    const int cur = static_cast<int>(t & 1);
    const bool has_next = t + 1 < num_k_tiles;
    if (has_next) { // issue the next tile's global loads now; they land during the math
      load_a_tile<T, LA>(g, bm, (t + 1) * rb::BK, tid, stage_a);
      load_b_tile<T, LB>(g, (t + 1) * rb::BK, bn, tid, stage_b);
    }
#pragma unroll
    for (int p = 0; p < rb::BK; ++p) {
      alignas(16) T a_frag[rb::TM];
      alignas(16) T b_frag[rb::TN];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int v = 0; v < rb::HM; v += W) {
          *reinterpret_cast<V*>(&a_frag[h * rb::HM + v]) =
              *reinterpret_cast<const V*>(&smem.a[cur][p][h * (rb::BM / 2) + ty * rb::HM + v]);
        }
#pragma unroll
        for (int v = 0; v < rb::HN; v += W) {
          *reinterpret_cast<V*>(&b_frag[h * rb::HN + v]) =
              *reinterpret_cast<const V*>(&smem.b[cur][p][h * (rb::BN / 2) + tx * rb::HN + v]);
        }
      }
#pragma unroll
      for (int i = 0; i < rb::TM; ++i)
#pragma unroll
        for (int j = 0; j < rb::TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
    }
    if (has_next) { // the other buffer: nobody reads it until after the barrier below
      store_a_tile<T, LA>(smem.a[cur ^ 1], tid, stage_a);
      store_b_tile<T, LB>(smem.b[cur ^ 1], tid, stage_b);
    }
    __syncthreads();
  }

  // Epilogue: add the bias, write 4-wide pieces (vector stores when every
  // row of C starts 16-byte aligned, i.e. n is a multiple of the width).
  T bias_val[rb::TN];
#pragma unroll
  for (int j = 0; j < rb::TN; ++j) {
    const int64_t col = bn + (j / rb::HN) * (rb::BN / 2) + tx * rb::HN + j % rb::HN;
    bias_val[j] = (g.bias != nullptr && col < g.n) ? g.bias[col * g.bias_stride] : T(0);
  }
  const bool vector_store = g.n % W == 0;
#pragma unroll
  for (int i = 0; i < rb::TM; ++i) {
    const int64_t row = bm + (i / rb::HM) * (rb::BM / 2) + ty * rb::HM + i % rb::HM;
    if (row >= g.m) continue;
    T* c_row = g.c + row * g.n;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col0 = bn + h * (rb::BN / 2) + tx * rb::HN;
      alignas(16) T out[rb::HN];
#pragma unroll
      for (int j = 0; j < rb::HN; ++j) out[j] = acc[i][h * rb::HN + j] + bias_val[h * rb::HN + j];
      if (vector_store) {
#pragma unroll
        for (int v = 0; v < rb::HN; v += W) {
          if (col0 + v < g.n) *reinterpret_cast<V*>(c_row + col0 + v) = *reinterpret_cast<const V*>(&out[v]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < rb::HN; ++j) {
          if (col0 + j < g.n) c_row[col0 + j] = out[j];
        }
      }
    }
  }
}
// [/book:cuda-register-blocked-kernel]

} // namespace mylinearops::cuda
