// CPU kernels: the progression the book's "making kernels fast" chapter
// walks through. reference -> blocked -> packed (+ register-blocked,
// vectorised micro-kernels in microkernel_*.cpp).
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../mylinearops.h"
#include "microkernel.h"

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
// of C split across threads with at::parallel_for.
template <typename T>
void gemm_blocked(const GemmArgs<T>& g) {
  constexpr int64_t kBlockM = 32, kBlockK = 128, kBlockN = 512;
  at::parallel_for(0, g.m, kBlockM, [&](int64_t row_begin, int64_t row_end) {
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

// Scratch space for packed panels, one per thread, reused across calls.
// 64-byte aligned so panel rows start on cache lines.
template <typename T>
T* scratch(int slot, size_t count) {
  struct Buffer {
    T* data = nullptr;
    size_t count = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffers[3];
  Buffer& buf = buffers[slot];
  if (buf.count < count) {
    std::free(buf.data);
    const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    buf.data = static_cast<T*>(std::aligned_alloc(64, bytes));
    TORCH_CHECK(buf.data != nullptr, "mylinearops: out of memory allocating ", bytes, " bytes of packing scratch");
    buf.count = count;
  }
  return buf.data;
}

// [book:cpu-packing]
// Copy an mc x kc block of A into panels of MR rows: panel r holds
// A[r*MR + i, p] at [p * MR + i], i.e. exactly the order the micro-kernel
// reads it, contiguous and zero-padded to a multiple of MR. Packing is where
// strides are handled: any layout of A (row-major, a transposed view, a
// slice) becomes the same contiguous panels.
template <typename T>
void pack_a(const GemmArgs<T>& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR, T* out) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    T* dst = out + ir * kc;
    const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
    const T* src = g.a + (i0 + ir) * g.a_stride0 + p0 * g.a_stride1;
    if (g.a_stride1 == 1) { // row-major: walk each row along k
      for (int i = 0; i < rows; ++i) {
        const T* row = src + i * g.a_stride0;
        for (int64_t p = 0; p < kc; ++p) dst[p * MR + i] = row[p];
      }
    } else { // column-major (e.g. X.t() in the backward) or general strides
      for (int64_t p = 0; p < kc; ++p) {
        const T* col = src + p * g.a_stride1;
        for (int i = 0; i < rows; ++i) dst[p * MR + i] = col[i * g.a_stride0];
      }
    }
    for (int64_t p = 0; p < kc; ++p) {
      for (int i = rows; i < MR; ++i) dst[p * MR + i] = T(0);
    }
  }
}

// Same for a kc x nc block of B, in panels of NR columns: [p * NR + j].
template <typename T>
void pack_b(const GemmArgs<T>& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int NR, T* out) {
  for (int64_t jr = 0; jr < nc; jr += NR) {
    T* dst = out + jr * kc;
    const int cols = static_cast<int>(std::min<int64_t>(NR, nc - jr));
    const T* src = g.b + p0 * g.b_stride0 + (j0 + jr) * g.b_stride1;
    if (g.b_stride1 == 1) { // row-major: each row of the panel is a copy
      for (int64_t p = 0; p < kc; ++p) {
        const T* row = src + p * g.b_stride0;
        for (int j = 0; j < cols; ++j) dst[p * NR + j] = row[j];
        for (int j = cols; j < NR; ++j) dst[p * NR + j] = T(0);
      }
    } else { // column-major (e.g. W.t() in the backward) or general strides
      for (int j = 0; j < cols; ++j) {
        const T* col = src + j * g.b_stride1;
        for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = col[p * g.b_stride0];
      }
      for (int64_t p = 0; p < kc; ++p) {
        for (int j = cols; j < NR; ++j) dst[p * NR + j] = T(0);
      }
    }
  }
}
// [/book:cpu-packing]

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// [book:cpu-packed-kernel]
// The BLIS loop nest. C is cut into macro tiles (about mc x nc), one task
// each, spread over threads with at::parallel_for. A task walks k in steps
// of kc, packs its kc x nc slice of B and its mc x kc slice of A, then runs
// the micro-kernel over every MR x NR tile: the B panel (kc x NR) stays in
// L1, the A block in L2, and C is read and written once per kc step.
template <typename T>
void gemm_packed(const GemmArgs<T>& g, const cpu::MicroKernel<T>& uk) {
  const int MR = uk.mr, NR = uk.nr;
  const int64_t m = g.m, n = g.n, k = g.k;

  // Split C into m_tiles x n_tiles tasks of about mc x nc, with a task count
  // that divides evenly between threads (a 128 x 784 output on 2 threads
  // becomes 2 tiles of 128 x 392, not 128 x 512 + 128 x 272).
  const int64_t threads = at::get_num_threads();
  const bool tiny = m * n * k < 64 * 64 * 64; // not worth waking threads
  const int64_t m_tiles = ceil_div(m, uk.mc);
  int64_t n_tiles = ceil_div(n, uk.nc);
  if (!tiny) {
    while ((m_tiles * n_tiles) % threads != 0 && n_tiles * NR < n) ++n_tiles;
  }
  const int64_t mc = round_up(ceil_div(m, m_tiles), MR);
  const int64_t nc = round_up(ceil_div(n, n_tiles), NR);
  const int64_t kc_max = std::min<int64_t>(uk.kc, k);

  // Bias, copied to a contiguous zero-padded row the micro-kernel can load.
  std::vector<T> bias;
  if (g.bias) {
    bias.assign(round_up(n, NR), T(0));
    for (int64_t j = 0; j < n; ++j) bias[j] = g.bias[j * g.bias_stride];
  }

  auto run_tile = [&](int64_t tile) {
    const int64_t i0 = (tile / n_tiles) * mc, j0 = (tile % n_tiles) * nc;
    const int64_t mc_here = std::min(mc, m - i0), nc_here = std::min(nc, n - j0);
    if (mc_here <= 0 || nc_here <= 0) return;
    T* a_pack = scratch<T>(0, round_up(mc_here, MR) * kc_max);
    T* b_pack = scratch<T>(1, round_up(nc_here, NR) * kc_max);
    T* edge = scratch<T>(2, static_cast<size_t>(MR) * NR);
    for (int64_t p0 = 0; p0 < k; p0 += kc_max) {
      const int64_t kc = std::min(kc_max, k - p0);
      const bool first = p0 == 0; // first k step writes C (+ bias), later ones add
      pack_b(g, p0, kc, j0, nc_here, NR, b_pack);
      pack_a(g, i0, mc_here, p0, kc, MR, a_pack);
      for (int64_t jr = 0; jr < nc_here; jr += NR) {
        const int cols = static_cast<int>(std::min<int64_t>(NR, nc_here - jr));
        const T* bias_here = (first && g.bias) ? bias.data() + j0 + jr : nullptr;
        for (int64_t ir = 0; ir < mc_here; ir += MR) {
          const int rows = static_cast<int>(std::min<int64_t>(MR, mc_here - ir));
          T* c = g.c + (i0 + ir) * n + (j0 + jr);
          const T* a_panel = a_pack + ir * kc;
          const T* b_panel = b_pack + jr * kc;
          if (rows == MR && cols == NR) {
            uk.fn(kc, a_panel, b_panel, c, n, bias_here, !first);
          } else { // edge tile: compute a full tile into scratch, copy the valid part
            uk.fn(kc, a_panel, b_panel, edge, NR, bias_here, false);
            for (int i = 0; i < rows; ++i) {
              for (int j = 0; j < cols; ++j) {
                c[i * n + j] = first ? edge[i * NR + j] : c[i * n + j] + edge[i * NR + j];
              }
            }
          }
        }
      }
    }
  };

  const int64_t tiles = m_tiles * n_tiles;
  if (tiny) {
    for (int64_t t = 0; t < tiles; ++t) run_tile(t);
  } else {
    at::parallel_for(0, tiles, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) run_tile(t);
    });
  }
}
// [/book:cpu-packed-kernel]

// [book:cpu-isa-dispatch]
// Run-time instruction-set dispatch: the micro-kernel files are compiled
// for their instruction set whatever the build machine is, and used only if
// the running CPU has it.
bool cpu_has(const char* isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::string_view(isa) == "avx512") return __builtin_cpu_supports("avx512f");
  if (std::string_view(isa) == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return std::string_view(isa) == "generic";
}
// [/book:cpu-isa-dispatch]

template <typename T>
const cpu::MicroKernel<T>* kernel_for(Algo algo);

template <>
const cpu::MicroKernel<float>* kernel_for<float>(Algo algo) {
  switch (algo) {
    case Algo::CpuPackedAvx512: return cpu::avx512_kernel_f32();
    case Algo::CpuPackedAvx2: return cpu::avx2_kernel_f32();
    case Algo::CpuPackedGeneric: return cpu::generic_kernel_f32();
    default: return nullptr;
  }
}

template <>
const cpu::MicroKernel<double>* kernel_for<double>(Algo algo) {
  switch (algo) {
    case Algo::CpuPackedAvx512: return cpu::avx512_kernel_f64();
    case Algo::CpuPackedAvx2: return cpu::avx2_kernel_f64();
    case Algo::CpuPackedGeneric: return cpu::generic_kernel_f64();
    default: return nullptr;
  }
}

constexpr Algo kPackedByPreference[] = {Algo::CpuPackedAvx512, Algo::CpuPackedAvx2, Algo::CpuPackedGeneric};

// The kernel for `algo` if this build has it and this CPU can run it.
template <typename T>
const cpu::MicroKernel<T>* usable_kernel(Algo algo) {
  const cpu::MicroKernel<T>* uk = kernel_for<T>(algo);
  return (uk != nullptr && cpu_has(uk->isa)) ? uk : nullptr;
}

// The widest usable micro-kernel, but AVX2 rather than AVX-512 when C is
// less than half as wide as the AVX-512 tile (the MLP's 256 -> 10 layer would
// compute 32 columns to keep 10). Never the portable kernel when AVX2 exists.
template <typename T>
const cpu::MicroKernel<T>* best_kernel(int64_t n) {
  const cpu::MicroKernel<T>* chosen = nullptr;
  for (Algo algo : kPackedByPreference) {
    const auto* uk = usable_kernel<T>(algo);
    if (uk == nullptr) continue;
    const bool narrower_fma_kernel = chosen != nullptr && chosen->nr > 2 * n && std::string_view(uk->isa) != "generic";
    if (chosen == nullptr || narrower_fma_kernel) chosen = uk;
  }
  TORCH_INTERNAL_ASSERT(chosen != nullptr, "mylinearops: the generic micro-kernel is always available");
  return chosen;
}

} // namespace

bool cpu_supports(Algo algo) {
  switch (algo) {
    case Algo::CpuPackedAvx512:
    case Algo::CpuPackedAvx2:
    case Algo::CpuPackedGeneric:
      return usable_kernel<float>(algo) != nullptr;
    default:
      return true;
  }
}

const char* cpu_microkernels() {
  static const std::string names = [] {
    std::string out;
    for (Algo algo : kPackedByPreference) {
      if (const auto* uk = usable_kernel<float>(algo)) {
        if (!out.empty()) out += ",";
        out += uk->isa;
      }
    }
    return out;
  }();
  return names.c_str();
}

template <typename T>
void cpu_gemm(Algo algo, const GemmArgs<T>& args) {
  switch (algo) {
    case Algo::CpuReference:
      return gemm_reference(args);
    case Algo::CpuBlocked:
      return gemm_blocked(args);
    case Algo::CpuPacked:
      return gemm_packed(args, *best_kernel<T>(args.n));
    case Algo::CpuPackedAvx512:
    case Algo::CpuPackedAvx2:
    case Algo::CpuPackedGeneric: {
      const cpu::MicroKernel<T>* uk = usable_kernel<T>(algo);
      TORCH_CHECK(uk != nullptr, "mylinearops: this CPU cannot run the requested micro-kernel");
      return gemm_packed(args, *uk);
    }
    default:
      TORCH_CHECK(false, "mylinearops: not a CPU algo");
  }
}

template void cpu_gemm<float>(Algo, const GemmArgs<float>&);
template void cpu_gemm<double>(Algo, const GemmArgs<double>&);

} // namespace mylinearops
