// CPU kernels: the progression the book's "making kernels fast" chapter
// walks through. reference -> blocked -> packed (+ register-blocked,
// vectorised micro-kernels in microkernel_*.cpp).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../mylinearops.h"
#include "../runtime.h"
#include "cpu_features.h"
#include "microkernel.h"
#include "tuning.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__SSE2__)
#include <xmmintrin.h> // baseline x86-64: the 4 x 4 transposes of packing
#endif

namespace mylinearops {
namespace {

// [book:cpu-reference-kernel]
// The definition of matrix multiplication, one output element at a time.
// Single-threaded and slow: B is read down a column (stride n) for every
// element of C. Every other kernel is checked against this one.
template <typename T>
void gemm_reference(const GemmArgs<T>& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        acc += g.a[i * g.a_stride0 + p * g.a_stride1] * g.b[p * g.b_stride0 + j * g.b_stride1];
      }
      if (g.bias) acc += g.bias[j * g.bias_stride];
      g.c[i * g.n + j] = acc;
    }
  }
}
// [/book:cpu-reference-kernel]

// [book:cpu-blocked-kernel]
// Loop order i-k-j so the innermost loop runs along a row of B and a row of
// C (contiguous, so the compiler vectorises it), cut into blocks so that the
// piece of B being reused (kBlockK x kBlockN) stays in cache, and the rows
// of C split across threads with runtime::parallel_for (at::parallel_for).
template <typename T>
void gemm_blocked(const GemmArgs<T>& g) {
  constexpr int64_t kBlockM = 32, kBlockK = 128, kBlockN = 512;
  runtime::parallel_for(0, g.m, kBlockM, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t i = row_begin; i < row_end; ++i) { // C = bias (or 0)
      for (int64_t j = 0; j < g.n; ++j) g.c[i * g.n + j] = g.bias ? g.bias[j * g.bias_stride] : T(0);
    }
    for (int64_t i0 = row_begin; i0 < row_end; i0 += kBlockM) {
      const int64_t i1 = std::min(i0 + kBlockM, row_end);
      for (int64_t p0 = 0; p0 < g.k; p0 += kBlockK) {
        const int64_t p1 = std::min(p0 + kBlockK, g.k);
        for (int64_t j0 = 0; j0 < g.n; j0 += kBlockN) {
          const int64_t j1 = std::min(j0 + kBlockN, g.n);
          for (int64_t i = i0; i < i1; ++i) {
            T* c_row = g.c + i * g.n;
            for (int64_t p = p0; p < p1; ++p) {
              const T a_ip = g.a[i * g.a_stride0 + p * g.a_stride1];
              const T* b_row = g.b + p * g.b_stride0;
              if (g.b_stride1 == 1) {
                for (int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b_row[j];
              } else {
                for (int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b_row[j * g.b_stride1];
              }
            }
          }
        }
      }
    }
  });
}
// [/book:cpu-blocked-kernel]

// Scratch space for packed panels, owned by the calling thread and reused
// across calls (a fresh allocation per call would page-fault its way through
// megabytes). On cache lines, so that panel rows start on them.
enum ScratchSlot { kPackedA, kEdgeTile, kPackedB, kScratchSlots };

template <typename T>
T* scratch(ScratchSlot slot, size_t count) {
  struct Buffer {
    cpu::CacheAlignedArray<T> data;
    size_t count = 0;
  };
  thread_local Buffer buffers[kScratchSlots];
  Buffer& buf = buffers[slot];
  if (buf.count < count) {
    buf.data.reset(); // the old buffer goes first: the two need not fit together
    buf.count = 0;
    buf.data = cpu::cache_aligned_array<T>(count);
    MYLINEAROPS_CHECK(buf.data != nullptr, "mylinearops: out of memory allocating ", count * sizeof(T), " bytes of packing scratch");
    buf.count = count;
  }
  return buf.data.get();
}

// [book:cpu-packing]
// Transposes a block stored as `count` vectors of `length` elements (vector j
// at src + j * ld, contiguous) into rows of `count` (element p of every vector
// at dst + p * dst_stride), 4 x 4 floats at a time: four 16-byte loads along
// four vectors, a transpose in registers, four stores, in place of 16
// single-element copies. Both packings need it: MR rows of a row-major A, and
// NR columns of a column-major B (the backward's dY W^T packs W.mT so). count
// must be a multiple of 4; returns how many of the `length` elements it did
// (the caller copies the rest element by element).
template <typename T>
int64_t transpose_4x4_blocks(const T* src, int64_t ld, int64_t count, int64_t length, T* dst, int64_t dst_stride) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    int64_t p = 0;
    for (; p + 4 <= length; p += 4) {
      for (int64_t j = 0; j < count; j += 4) {
        __m128 r0 = _mm_loadu_ps(src + (j + 0) * ld + p), r1 = _mm_loadu_ps(src + (j + 1) * ld + p);
        __m128 r2 = _mm_loadu_ps(src + (j + 2) * ld + p), r3 = _mm_loadu_ps(src + (j + 3) * ld + p);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3); // r0 = vectors j..j+3 at element p, r1 at p+1, ...
        _mm_storeu_ps(dst + (p + 0) * dst_stride + j, r0), _mm_storeu_ps(dst + (p + 1) * dst_stride + j, r1);
        _mm_storeu_ps(dst + (p + 2) * dst_stride + j, r2), _mm_storeu_ps(dst + (p + 3) * dst_stride + j, r3);
      }
    }
    return p;
  }
#endif
  (void)src, (void)ld, (void)count, (void)length, (void)dst, (void)dst_stride;
  return 0; // no vector code here: the caller copies element by element
}

// Copy an mc x kc block of A into panels of MR rows: panel r holds
// A[r*MR + i, p] at [p * MR + i], i.e. exactly the order the micro-kernel
// reads it, contiguous and zero-padded to a multiple of MR. Packing is where
// strides are handled: any layout of A (row-major, a transposed view, a
// slice) becomes the same contiguous panels.
template <typename T, int MR>
void pack_a_panels(const GemmArgs<T>& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* out) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    T* dst = out + ir * kc;
    const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
    const T* src = g.a + (i0 + ir) * g.a_stride0 + p0 * g.a_stride1;
    if (rows == MR && g.a_stride1 == 1) { // row-major: MR rows side by side, writes contiguous
      int64_t p = 0;
      if constexpr (MR % 4 == 0) p = transpose_4x4_blocks(src, g.a_stride0, MR, kc, dst, MR);
      const T* row[MR];
      for (int i = 0; i < MR; ++i) row[i] = src + i * g.a_stride0;
      for (; p < kc; ++p) {
        for (int i = 0; i < MR; ++i) dst[p * MR + i] = row[i][p];
      }
      continue;
    }
    if (rows == MR && g.a_stride0 == 1) { // column-major (a weight gradient's X^T): MR adjacent elements per step
      // memcpy of a size known at compile time: a few moves inline, where
      // std::copy_n became a call to memmove per step
      for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * MR, src + p * g.a_stride1, MR * sizeof(T));
      continue;
    }
    // general strides, last rows
    for (int64_t p = 0; p < kc; ++p) {
      const T* col = src + p * g.a_stride1;
      for (int i = 0; i < rows; ++i) dst[p * MR + i] = col[i * g.a_stride0];
      for (int i = rows; i < MR; ++i) dst[p * MR + i] = T(0);
    }
  }
}

template <typename T>
void pack_a(const GemmArgs<T>& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR, T* out) {
  switch (MR) { // a compile-time MR lets the compiler unroll the row loop
    case 6: return pack_a_panels<T, 6>(g, i0, mc, p0, kc, out);
    case 8: return pack_a_panels<T, 8>(g, i0, mc, p0, kc, out);
    case 12: return pack_a_panels<T, 12>(g, i0, mc, p0, kc, out);
    default: MYLINEAROPS_CHECK(false, "mylinearops: no A packing for MR=", MR);
  }
}

// `rows` rows of `cols` elements (src row i at src + i * ld) to dst, rows
// NR apart. Whole rows of a panel are a copy of a size known at compile time
// (a few vector moves): with the size a variable, the copies took about 1.4
// times as long.
template <typename T, int kCols>
void copy_whole_rows(const T* src, int64_t ld, int64_t rows, T* dst) {
  for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * kCols, src + i * ld, kCols * sizeof(T));
}

template <typename T>
void copy_rows(const T* src, int64_t ld, int64_t rows, int64_t cols, int NR, T* dst) {
  if (cols == NR) {
    switch (NR) { // the widths of the tiles in microkernel_*.cpp
      case 4: return copy_whole_rows<T, 4>(src, ld, rows, dst);
      case 8: return copy_whole_rows<T, 8>(src, ld, rows, dst);
      case 16: return copy_whole_rows<T, 16>(src, ld, rows, dst);
      case 32: return copy_whole_rows<T, 32>(src, ld, rows, dst);
      case 48: return copy_whole_rows<T, 48>(src, ld, rows, dst);
      default: break;
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * NR + j] = src[i * ld + j];
  }
}

// Same for panels [panel_begin, panel_end) of a kc x nc block of B, in
// panels of NR columns: panel q holds B[p0 + p, j0 + q*NR + j] at
// [q * NR * kc + p * NR + j]. With zero_pad, the columns of the last panel
// past nc are zeros; a tile with a masked twin never reads them.
template <typename T>
void pack_b(const GemmArgs<T>& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int NR,
            int64_t panel_begin, int64_t panel_end, bool zero_pad, T* out) {
  if (panel_begin >= panel_end) return;
  const int64_t col_end = std::min(nc, panel_end * NR);
  if (g.b_stride1 == 1) {
    // Row-major: kPackRows rows of B at a time, panel by panel, so that each
    // panel is written in one run per chunk while the chunk's rows stay in
    // L1. Dealing each row out to all the panels made the writes hop between
    // panels: on one thread of a Xeon, packing a B already in L2 took about
    // 1.6 times as long that way. The two orders took about as long for a B
    // read from memory, and on two threads, where each thread's writes wait
    // for the other core to give up the lines of the buffer it read last time.
    constexpr int64_t kPackRows = 16;
    for (int64_t p = 0; p < kc; p += kPackRows) {
      const int64_t rows = std::min(kPackRows, kc - p);
      for (int64_t q = panel_begin; q < panel_end; ++q) {
        const int64_t cols = std::min<int64_t>(NR, col_end - q * NR);
        copy_rows(g.b + (p0 + p) * g.b_stride0 + j0 + q * NR, g.b_stride0, rows, cols, NR, out + q * NR * kc + p * NR);
      }
    }
  } else { // column-major (e.g. W.t() in the backward) or general strides:
    // fill each panel row by row, reading its NR columns side by side
    for (int64_t q = panel_begin; q < panel_end; ++q) {
      const int64_t cols = std::min<int64_t>(NR, col_end - q * NR);
      const T* src = g.b + p0 * g.b_stride0 + (j0 + q * NR) * g.b_stride1;
      T* dst = out + q * NR * kc;
      int64_t p = 0;
      if (g.b_stride0 == 1 && cols % 4 == 0) p = transpose_4x4_blocks(src, g.b_stride1, cols, kc, dst, NR);
      for (; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) dst[p * NR + j] = src[p * g.b_stride0 + j * g.b_stride1];
      }
    }
  }
  if (!zero_pad) return;
  const int64_t padded_end = panel_end * NR; // zero the columns past the edge of B
  for (int64_t j = col_end; j < padded_end; ++j) {
    T* dst = out + (j / NR) * NR * kc + j % NR;
    for (int64_t p = 0; p < kc; ++p) dst[p * NR] = T(0);
  }
}
// [/book:cpu-packing]

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// How the threads share C: a grid of row_groups x col_groups. A column group
// packs the panels of B it needs itself, so with a single row group the
// threads share nothing and never wait for each other; the row_groups threads
// of a column group share its panels of B (a barrier per block) and split its
// rows, each packing only the rows of A it computes. Columns are split in
// whole steps of col_step (column_range below). The grid minimises a rough
// time per thread: its multiply-adds, plus every element it packs counted as
// kCopyCost of them (a copy moves one element per cycle, the FMA units do 16
// or more multiply-adds per cycle), and every element of B it reads from
// panels that other threads packed as kShareCost (those lines come from the
// other cores' caches). On two threads, kShareCost 32 favours row groups where
// C is about twice as tall as wide or taller (columns that split unevenly
// between two groups tip closer cases to rows): on a Zen 4, timed in one process,
// row groups took 0.97x the time of column groups at 768 x 768 x 256, the
// same within 1% at 1536 x 512 x 768, and 1.01x at 1536 x 512 x 1024. In
// some processes the other core's lines cost far more: row groups then took
// 1.07x at 1024^3 and 1.6x at 128 x 1024 x 1024.
// Rows are dealt out as threads finish, so a row group computes about its
// share of the row panels. Where the tuning search timed sharing slower
// (share_b false, tuning.h), the threads form column groups only, unless B
// is read in place (there is little to share) or C has fewer column steps
// than threads: a 10-wide C in column groups left one thread all the work.
struct ThreadGrid {
  int row_groups, col_groups;
};

ThreadGrid thread_grid(int threads, int64_t m, int64_t n, int64_t k, int MR, int64_t col_step, bool pack_a, bool pack_b,
                       bool share_b) {
  constexpr int64_t kCopyCost = 16, kShareCost = 32;
  ThreadGrid best{1, threads};
  int64_t best_cost = INT64_MAX;
  const bool rows_may_share = share_b || !pack_b || ceil_div(n, col_step) < threads;
  for (int rows = 1; rows <= (rows_may_share ? threads : 1); ++rows) {
    if (threads % rows != 0) continue;
    const int cols = threads / rows;
    const int64_t my_rows = ceil_div(round_up(m, MR), rows), my_cols = ceil_div(ceil_div(n, col_step), cols) * col_step;
    const int64_t copies = (pack_a ? my_rows * k : 0) + (pack_b ? my_cols * k / rows : 0);
    const int64_t shared = pack_b ? my_cols * k * (rows - 1) / rows : 0;
    const int64_t cost = my_rows * my_cols * k + kCopyCost * copies + kShareCost * shared;
    if (cost < best_cost) best = {rows, cols}, best_cost = cost;
  }
  return best;
}

// The columns [begin, end) of an nc-wide block that column group `group` of
// `groups` computes: whole steps of `step` columns (NR, or one vector where a
// masked tile computes a ragged panel in place, so that 256 columns in
// 48-wide panels split 128 + 128 and not 144 + 112).
struct ColumnRange {
  int64_t begin, end;
};

ColumnRange column_range(int64_t nc, int64_t step, int group, int groups) {
  const int64_t steps = ceil_div(nc, step);
  return {std::min(nc, steps * group / groups * step), std::min(nc, steps * (group + 1) / groups * step)};
}

// What the last packed product on this thread did, for the book and the
// tests: the plan (blocks, thread grid, what was packed), how many
// elements of A and B were copied into panels, and how many cache lines of
// packed B the micro-kernels pulled toward L2 ahead of use.
struct GemmPlan {
  const char* microkernel = "";
  int mr = 0, nr = 0;
  int64_t kc = 0, mc = 0, nc = 0, row_block = 0;
  int threads = 0, row_groups = 0, col_groups = 0;
  bool pack_a = false, pack_b = false, partial_tiles = false;
  std::atomic<int64_t> a_elements_packed{0}, b_elements_packed{0}, b_lines_prefetched{0};
  std::atomic<int64_t> row_blocks_taken{0}; // by all threads, in all k blocks
};
thread_local GemmPlan last_plan;

// [book:cpu-packed-kernel]
// The BLIS loop nest, run by one OpenMP team whose threads split C into a
// grid of row groups x column groups (thread_grid above):
//   for each kc x nc block of B (the jc and pc loops):
//     the threads of a column group pack its panels of B once, together,
//     into a buffer they share; barrier (only if row groups share it);
//     each thread, while blocks of rows are left (a counter the column
//     group's threads share deals them out, the next to whoever asks):
//       packs that block's rows of A, mc x kc at most (private: it stays
//       in its L2),
//       runs the micro-kernel over its MR x NR tiles, walking down the A
//       panels for each kc x NR panel of B; meanwhile the calls pull the
//       panel of B that comes next toward L2, a share each.
// Dealt out, not split in advance: a thread that another program slows
// down (on a shared or virtual machine, for seconds at a time) takes fewer
// blocks, instead of the others waiting for it at the end. So the threads of
// a column group take blocks of mc rows, or fewer, sized to give each thread
// as many, up to 8, of 8 row panels or more where the rows allow (each block
// walks all of B's panels); and smaller ones at the end, so that they finish
// together.
// Two B buffers alternate, so one barrier per block suffices: a thread can
// pack block s+1 only after every thread has finished computing block s-1.
// Products with few rows skip the packing (see "What to pack").
template <typename T>
void gemm_packed(const GemmArgs<T>& g, const cpu::MicroKernel<T>& uk, const cpu::Blocking& blocks,
                 const cpu::InPlaceRows& in_place, bool share_b) {
  const int MR = uk.mr, NR = uk.nr;
  const int64_t m = g.m, n = g.n, k = g.k;
  // The cache blocks (from this CPU's caches, or tuned); k and n split into
  // equal blocks (with kc = 1024, k = 1100 becomes 552 + 548, not 1024 + 76:
  // a thin last block would cost a whole pass over C for little work).
  const int64_t mc_max = blocks.mc;
  // MYLINEAROPS_PACK=always|never overrides the rule of "What to pack" below,
  // to measure it.
  const cpu::PackMode pack_mode = cpu::pack_mode();
  const int64_t kc_max = round_up(ceil_div(k, ceil_div(k, blocks.kc)), 8);
  const int64_t nc_max = round_up(ceil_div(n, ceil_div(n, blocks.nc)), NR);

  // Bias, copied to a contiguous zero-padded row the micro-kernel can load.
  std::vector<T> bias;
  if (g.bias) {
    bias.assign(round_up(n, NR), T(0));
    for (int64_t j = 0; j < n; ++j) bias[j] = g.bias[j * g.bias_stride];
  }
  // One thread for tiny products (waking a team costs more than it saves),
  // and inside another parallel region (no nested teams).
  const bool tiny = m * n * k < 64 * 64 * 64;
  const int threads = tiny ? 1 : runtime::team_size();

  // All buffers come from the calling thread's scratch, allocated here: code
  // inside the parallel region must not throw.
  // Room for each column group's panels of the widest block (see group_panels_max below).
  const size_t b_buffer = static_cast<size_t>(kc_max) * NR * (ceil_div(nc_max, NR) + 2 * threads + 1);
  const size_t a_buffer = static_cast<size_t>(round_up(mc_max, MR)) * kc_max;
  T* const b_packs = scratch<T>(kPackedB, 2 * b_buffer);
  T* const a_packs = scratch<T>(kPackedA, threads * a_buffer);
  T* const edges = scratch<T>(kEdgeTile, static_cast<size_t>(threads) * MR * NR);
  // Per column group, the count of rows dealt out. It only grows: each k
  // block deals out its m rows, counting on from where the last one stopped.
  struct alignas(64) RowCounter { // a cache line each: the column groups' threads do not contend
    std::atomic<int64_t> dealt{0};
  };
  std::vector<RowCounter> row_counters(threads);

  // What to pack. Packing costs a copy of each operand and pays back through
  // reuse: a panel of B serves every row panel of C, a panel of A every
  // column panel. When C has few rows (the MLP's batch of 128), a panel of B
  // serves only a handful of micro-kernel calls, and both operands are read
  // in place, as in BLIS's small-matrix ("sup") path: up to 255 rows, or up
  // to as many as the tuning search timed reading in place faster, for each
  // layout of A apart, in products no deeper (k) and no wider (n) than the
  // ones it timed. Not when B's rows lie a multiple of L1's set span apart (a
  // 1024-wide float matrix: 4 KiB): the k rows of a panel then fall in one
  // set, and on a Zen 4 a product of 128 x 1024 x 1024 read in place took
  // 1.5 times as long as packed.
  // B must be packed when its rows are not contiguous (the micro-kernel
  // loads vectors along them), A when neither of its strides is 1.
  // A column-major A (a weight gradient's X^T, k the batch) with more rows is
  // packed like a row-major one: its MR elements of a k step are adjacent, so
  // the copy is one short run per step; read in place, its steps lie a row of
  // X apart.
  // Either layout is read in place whatever the rows when C is no wider than
  // one tile (the MLP's 10 classes): each panel of A then serves a single
  // micro-kernel call, and a copy would be read once. Not when the steps of a
  // panel (its rows, or its columns) lie a multiple of L1's set span apart,
  // which would put all of them in one set.
  const int64_t set_span = cpu::cache_sizes().l1d_set_span;
  const bool a_column_major = g.a_stride0 == 1 && g.a_stride1 != 1;
  const bool within_trials = k <= (a_column_major ? cpu::kInPlaceColumnMajorTrialK : cpu::kInPlaceTrialSize) &&
      n <= cpu::kInPlaceTrialSize;
  const int64_t in_place_rows = !within_trials ? cpu::kInPlaceRows : a_column_major ? in_place.column_major : in_place.row_major;
  const bool b_rows_share_a_set = g.b_stride1 == 1 && (g.b_stride0 * static_cast<int64_t>(sizeof(T))) % set_span == 0;
  const bool small = pack_mode == cpu::PackMode::Never ||
      (pack_mode == cpu::PackMode::Auto && m <= in_place_rows && !b_rows_share_a_set);
  const int64_t a_lead = g.a_stride1 == 1 ? g.a_stride0 : g.a_stride1; // between the steps of a panel
  const bool one_tile_wide_a = (g.a_stride0 == 1 || g.a_stride1 == 1) && n <= NR &&
      (a_lead * static_cast<int64_t>(sizeof(T))) % set_span != 0;
  // A ragged last panel of columns: a tile with a masked twin (AVX-512's)
  // computes it in place, reading B and writing C in those columns only;
  // others pad it (packing that panel of B, zeros past its edge) and compute a
  // whole tile into scratch, of which the valid part is copied to C.
  const bool partial_tiles = uk.partial_fn != nullptr;
  const bool pack_b_now = !small || g.b_stride1 != 1;
  const bool pack_a_now = (g.a_stride0 != 1 && g.a_stride1 != 1) ||
      (!small && !(pack_mode == cpu::PackMode::Auto && one_tile_wide_a));

  GemmPlan& plan = last_plan;
  plan.microkernel = uk.isa, plan.mr = MR, plan.nr = NR;
  plan.kc = kc_max, plan.mc = mc_max, plan.nc = nc_max, plan.pack_a = pack_a_now, plan.pack_b = pack_b_now;
  plan.row_block = 0;
  plan.partial_tiles = partial_tiles;
  plan.a_elements_packed = 0, plan.b_elements_packed = 0, plan.b_lines_prefetched = 0, plan.row_blocks_taken = 0;

  auto work = [&](int thread, int threads) {
    const int64_t col_step = partial_tiles ? uk.partial_step : NR;
    // The columns of a block, not nc_max: rounded up to NR, 10 columns read as
    // 32 with AVX-512's tile, two column steps, and one group got none.
    const ThreadGrid grid = thread_grid(threads, m, std::min(n, nc_max), k, MR, col_step, pack_a_now, pack_b_now, share_b);
    // Each column group packs into a region of the B buffers of its own, the
    // same for every block: column groups do not wait for each other, and one
    // may pack a later block (another nc, a shorter kc) into the buffer that
    // another still computes from. At most ceil(nc_max / NR) + 2 col_groups + 1
    // panels in all.
    const int64_t group_panels_max = ceil_div(ceil_div(ceil_div(nc_max, col_step), grid.col_groups) * col_step, NR);
    if (thread == 0) plan.threads = threads, plan.row_groups = grid.row_groups, plan.col_groups = grid.col_groups;
    int64_t a_packed = 0, b_packed = 0, b_prefetched = 0;
    const int row_group = thread / grid.col_groups, col_group = thread % grid.col_groups;
    // A thread alone in its column group takes its rows mc at a time. Threads
    // that share them take as many blocks each (see above): 128 rows in 6-row
    // panels on two threads are 66 + 62, where blocks of 8 panels gave one
    // thread 80 rows and the other 48 (and a 128 x 256 x 784 product 1.2 times
    // the time on a Zen 4).
    constexpr int64_t kRowBlocksPerThread = 8, kMinRowBlockPanels = 8;
    const int64_t row_panels = ceil_div(m, MR);
    const int64_t blocks_per_thread = std::clamp<int64_t>(row_panels / (kMinRowBlockPanels * grid.row_groups), 1, kRowBlocksPerThread);
    const int64_t row_block = grid.row_groups == 1
        ? mc_max
        : std::min(mc_max, ceil_div(row_panels, blocks_per_thread * grid.row_groups) * MR);
    if (thread == 0) plan.row_block = row_block;
    std::atomic<int64_t>& rows_dealt = row_counters[col_group].dealt;
    int64_t k_block_start = 0; // the counter's value at the start of this k block
    int64_t blocks_taken = 0;
    // The next block of rows for this thread: [begin, begin + rows). Whole
    // blocks while many are left; then, where threads share the rows in 4
    // blocks each or more, a 1/(2 row_groups) share of what is left, down to
    // 2 MR rows: the threads finish together instead of one waiting through
    // the other's last whole block. With fewer blocks, the smaller ones cost
    // more than the wait they save.
    const bool shrink_at_end = grid.row_groups > 1 && m >= 4 * grid.row_groups * row_block;
    auto take_rows = [&](int64_t& begin, int64_t& rows) {
      int64_t dealt = rows_dealt.load(std::memory_order_relaxed);
      for (;;) {
        const int64_t done = dealt - k_block_start, left = m - done;
        if (left <= 0) return false;
        rows = shrink_at_end
            ? std::clamp(round_up(ceil_div(left, 2 * grid.row_groups), MR), static_cast<int64_t>(2 * MR), row_block)
            : row_block;
        rows = std::min(rows, left);
        if (rows_dealt.compare_exchange_weak(dealt, dealt + rows, std::memory_order_relaxed)) {
          begin = done, ++blocks_taken;
          return true;
        }
      }
    };
    T* a_pack = a_packs + thread * a_buffer;
    T* edge = edges + thread * MR * NR;
    int64_t block = 0;
    for (int64_t j0 = 0; j0 < n; j0 += nc_max) {
      const int64_t nc = std::min(nc_max, n - j0);
      const ColumnRange cols_here = column_range(nc, col_step, col_group, grid.col_groups);
      const int64_t width = cols_here.end - cols_here.begin, group_panels = ceil_div(width, NR);
      const int64_t jb = j0 + cols_here.begin; // this group's first column of B and C
      for (int64_t p0 = 0; p0 < k; p0 += kc_max, ++block) {
        const int64_t kc = std::min(kc_max, k - p0);
        const bool first = p0 == 0; // the first k block writes C (+ bias), later ones add
        T* b_pack = b_packs + (block % 2) * b_buffer + col_group * group_panels_max * NR * kc_max;
        // This column group's panels, packed by its row_groups threads together.
        if (pack_b_now) {
          const int64_t first_panel = group_panels * row_group / grid.row_groups;
          const int64_t end_panel = group_panels * (row_group + 1) / grid.row_groups;
          pack_b(g, p0, kc, jb, width, NR, first_panel, end_panel, !partial_tiles, b_pack);
          b_packed += kc * std::max<int64_t>(0, std::min(width, end_panel * NR) - first_panel * NR);
        } else if (group_panels * NR > width && row_group == 0 && !partial_tiles) { // ragged last panel, padded
          pack_b(g, p0, kc, jb, width, NR, group_panels - 1, group_panels, true, b_pack);
          b_packed += kc * (width - (group_panels - 1) * NR);
        }
#ifdef _OPENMP
        if (grid.row_groups > 1) {
#pragma omp barrier
        }
#endif
        int64_t i0 = 0, mc = 0;
        while (take_rows(i0, mc)) {
          // A is read in place unless packing pays (see above); a ragged last
          // panel of rows is always packed, zero-padded, so the micro-kernel
          // never reads past the last row.
          const int64_t full_rows = pack_a_now ? 0 : mc / MR * MR;
          if (full_rows < mc) {
            pack_a(g, i0 + full_rows, mc - full_rows, p0, kc, MR, a_pack);
            a_packed += (mc - full_rows) * kc;
          }
          for (int64_t q = 0; q < group_panels; ++q) {
            const int64_t jr = q * NR; // from the group's first column
            const int cols = static_cast<int>(std::min<int64_t>(NR, width - jr));
            const bool b_packed = pack_b_now || (cols < NR && !partial_tiles);
            const T* b_panel = b_packed ? b_pack + jr * kc : g.b + p0 * g.b_stride0 + jb + jr;
            const int64_t b_rs = b_packed ? NR : g.b_stride0;
            const T* bias_here = (first && g.bias) ? bias.data() + jb + jr : nullptr;
            // The packed panel the calls after this panel's start with (the
            // next one, or after the last the first again, for the next block
            // of rows), which is likely still in L3 or in the other core's
            // cache: every call here pulls its share of it toward L2.
            const int64_t next_q = q + 1 < group_panels ? q + 1 : (i0 + mc < m ? 0 : -1);
            const char* next_panel = (pack_b_now && next_q >= 0) ? reinterpret_cast<const char*>(b_pack + next_q * NR * kc) : nullptr;
            // Call c takes lines [c * lines / calls, (c + 1) * lines / calls),
            // counted up without a division per call (at k = 10, three
            // divisions took a tenth of the product's time).
            const int64_t panel_lines = ceil_div(kc * NR * static_cast<int64_t>(sizeof(T)), cpu::kCacheLineBytes), calls = ceil_div(mc, MR);
            const int64_t lines_per_call = panel_lines / calls, extra_lines = panel_lines % calls;
            int64_t end_line = 0, carry = 0;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
              cpu::L2Prefetch next;
              if (next_panel != nullptr) {
                const int64_t first_line = end_line;
                end_line += lines_per_call, carry += extra_lines;
                if (carry >= calls) ++end_line, carry -= calls;
                next = {next_panel + first_line * cpu::kCacheLineBytes, end_line - first_line};
                b_prefetched += std::min(next.lines, kc); // a micro-kernel pulls one line per k step
              }
              T* c = g.c + (i0 + ir) * n + (jb + jr);
              const bool packed = ir >= full_rows;
              const T* a_here = packed ? a_pack + (ir - full_rows) * kc : g.a + (i0 + ir) * g.a_stride0 + p0 * g.a_stride1;
              const int64_t a_rs = packed ? 1 : g.a_stride0, a_cs = packed ? MR : g.a_stride1;
              if (rows == MR && cols == NR) {
                uk.fn(kc, a_here, a_rs, a_cs, b_panel, b_rs, c, n, bias_here, !first, next);
              } else if (rows == MR && partial_tiles) {
                uk.partial_fn(kc, a_here, a_rs, a_cs, b_panel, b_rs, c, n, bias_here, !first, next, cols);
              } else { // edge tile: compute a full tile into scratch, copy the valid part
                if (partial_tiles) { // B may be an unpadded panel: read only its columns
                  uk.partial_fn(kc, a_here, a_rs, a_cs, b_panel, b_rs, edge, NR, bias_here, false, next, cols);
                } else {
                  uk.fn(kc, a_here, a_rs, a_cs, b_panel, b_rs, edge, NR, bias_here, false, next);
                }
                for (int i = 0; i < rows; ++i) {
                  for (int j = 0; j < cols; ++j) {
                    c[i * n + j] = first ? edge[i * NR + j] : c[i * n + j] + edge[i * NR + j];
                  }
                }
              }
            }
          }
        }
        k_block_start += m;
      }
    }
    plan.a_elements_packed += a_packed;
    plan.b_elements_packed += b_packed;
    plan.b_lines_prefetched += b_prefetched;
    plan.row_blocks_taken += blocks_taken;
  };

#ifdef _OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    work(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  work(0, 1);
}
// [/book:cpu-packed-kernel]

// [book:cpu-isa-dispatch]
// Which micro-kernel `packed` runs. The micro-kernel files are compiled for
// their instruction set whatever the build machine is; cpu_features.cpp
// decides at run time which ones this CPU may run and which is fastest.
cpu::Isa isa_of(Algo algo) {
  switch (algo) {
    case Algo::CpuPackedAvx512: return cpu::Isa::Avx512;
    case Algo::CpuPackedAvx2: return cpu::Isa::Avx2;
    default: return cpu::Isa::Generic;
  }
}

template <typename T>
const cpu::MicroKernel<T>* kernel_for(cpu::Isa isa);

template <>
const cpu::MicroKernel<float>* kernel_for<float>(cpu::Isa isa) {
  switch (isa) {
    case cpu::Isa::Avx512: return cpu::avx512_kernel_f32();
    case cpu::Isa::Avx2: return cpu::avx2_kernel_f32();
    default: return cpu::generic_kernel_f32();
  }
}

template <>
const cpu::MicroKernel<double>* kernel_for<double>(cpu::Isa isa) {
  switch (isa) {
    case cpu::Isa::Avx512: return cpu::avx512_kernel_f64();
    case cpu::Isa::Avx2: return cpu::avx2_kernel_f64();
    default: return cpu::generic_kernel_f64();
  }
}

// The kernel for `isa` if this build has it and this CPU may run it.
template <typename T>
const cpu::MicroKernel<T>* usable_kernel(cpu::Isa isa) {
  const cpu::MicroKernel<T>* uk = kernel_for<T>(isa);
  return (uk != nullptr && cpu::usable(isa)) ? uk : nullptr;
}

// A micro-kernel, the cache blocks to run it with, and up to how many rows
// the driver reads A and B in place.
template <typename T>
struct KernelChoice {
  const cpu::MicroKernel<T>* kernel;
  cpu::Blocking blocking;
  cpu::InPlaceRows in_place;
  bool share_b = true;
};

template <typename T>
KernelChoice<T> with_derived_blocks(const cpu::MicroKernel<T>* uk) {
  return {uk, cpu::blocking_for(uk->mr, uk->nr, sizeof(T)), cpu::InPlaceRows{}, true};
}

// The preferred kernel (cpu_features.cpp: MYLINEAROPS_ISA, the only one, or
// calibrated). Float products take the searched tile and blocks that suit
// their shape and the searched in-place and sharing rules (tuning.h), double
// ones the cache-derived blocks and the default rules.
template <typename T>
KernelChoice<T> best_kernel(int64_t m, int64_t n) {
  const cpu::MicroKernel<T>* chosen = usable_kernel<T>(cpu::preferred_isa().isa);
  if (chosen == nullptr) chosen = usable_kernel<T>(cpu::Isa::Generic);
  MYLINEAROPS_CHECK(chosen != nullptr, "mylinearops: the generic micro-kernel is always available");
  if constexpr (std::is_same_v<T, float>) {
    const cpu::Tuning& tuned = cpu::float_tuning(runtime::team_size());
    if (std::string_view(tuned.kernel->isa) == chosen->isa) {
      const cpu::TileChoice tile = cpu::tile_for_product(tuned, m, n);
      return {tile.kernel, tile.blocking, tuned.in_place, tuned.share_b};
    }
  }
  return with_derived_blocks(chosen);
}
// [/book:cpu-isa-dispatch]

} // namespace

bool cpu_supports(Algo algo) {
  switch (algo) {
    case Algo::CpuPackedAvx512:
    case Algo::CpuPackedAvx2:
    case Algo::CpuPackedGeneric:
      return usable_kernel<float>(isa_of(algo)) != nullptr;
    default:
      return true;
  }
}

const char* cpu_microkernels() {
  static const std::string names = [] {
    std::string out;
    for (cpu::Isa isa : cpu::kAllIsas) {
      if (const auto* uk = usable_kernel<float>(isa)) {
        if (!out.empty()) out += ",";
        out += uk->isa;
      }
    }
    return out;
  }();
  return names.c_str();
}

std::string cpu_last_gemm_plan() {
  const GemmPlan& p = last_plan;
  return std::string("microkernel=") + p.microkernel + ";mr=" + std::to_string(p.mr) +
      ";nr=" + std::to_string(p.nr) + ";kc=" + std::to_string(p.kc) + ";mc=" + std::to_string(p.mc) +
      ";nc=" + std::to_string(p.nc) + ";row_block=" + std::to_string(p.row_block) + ";threads=" + std::to_string(p.threads) +
      ";row_groups=" + std::to_string(p.row_groups) + ";col_groups=" + std::to_string(p.col_groups) +
      ";pack_a=" + std::to_string(p.pack_a) + ";pack_b=" + std::to_string(p.pack_b) +
      ";partial_tiles=" + std::to_string(p.partial_tiles) +
      ";a_elements_packed=" + std::to_string(p.a_elements_packed.load()) +
      ";b_elements_packed=" + std::to_string(p.b_elements_packed.load()) +
      ";b_lines_prefetched=" + std::to_string(p.b_lines_prefetched.load()) +
      ";row_blocks_taken=" + std::to_string(p.row_blocks_taken.load());
}

template <typename T>
void cpu_gemm(Algo algo, const GemmArgs<T>& args) {
  switch (algo) {
    case Algo::CpuReference:
      return gemm_reference(args);
    case Algo::CpuBlocked:
      return gemm_blocked(args);
    case Algo::CpuPacked: {
      const KernelChoice<T> choice = best_kernel<T>(args.m, args.n);
      return gemm_packed(args, *choice.kernel, choice.blocking, choice.in_place, choice.share_b);
    }
    case Algo::CpuPackedAvx512:
    case Algo::CpuPackedAvx2:
    case Algo::CpuPackedGeneric: {
      const cpu::MicroKernel<T>* uk = usable_kernel<T>(isa_of(algo));
      MYLINEAROPS_CHECK(uk != nullptr, "mylinearops: this CPU cannot run the requested micro-kernel");
      return gemm_packed(args, *uk, cpu::blocking_for(uk->mr, uk->nr, sizeof(T)), cpu::InPlaceRows{}, true);
    }
    default:
      MYLINEAROPS_CHECK(false, "mylinearops: not a CPU algo");
  }
}

template void cpu_gemm<float>(Algo, const GemmArgs<float>&);

cpu::RowSplit cpu::gemm_packed_f32(const GemmArgs<float>& g, const cpu::MicroKernel<float>& uk,
                                   const cpu::Blocking& blocks, const cpu::InPlaceRows& in_place, bool share_b) {
  gemm_packed(g, uk, blocks, in_place, share_b);
  return {last_plan.row_block, last_plan.row_groups, last_plan.col_groups};
}
template void cpu_gemm<double>(Algo, const GemmArgs<double>&);

} // namespace mylinearops
