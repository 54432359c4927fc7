// Runs every CUDA kernel of csrc/cuda/matmul_kernels.cuh on the CPU through
// cuda_shim.h and compares with a float64 reference: all kernels, float and
// double, operands row-major / column-major / strided / misaligned, with and
// without bias, threads scheduled in forward and in reverse order.
// Prints one line per failure and a summary; exit status 1 on any failure.
#include "cuda_shim.h"

#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "../../csrc/cuda/matmul_kernels.cuh"

using mylinearops::GemmArgs;
using namespace mylinearops::cuda;

namespace {

uint64_t rng_state = 42;
double uniform() { // in [-1, 1)
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return static_cast<double>(rng_state >> 11) / static_cast<double>(1ULL << 53) * 2.0 - 1.0;
}

template <typename T>
struct Operand {
  std::vector<T> storage;
  const T* data;
  int64_t s0, s1;
  T at(int64_t i, int64_t j) const { return data[i * s0 + j * s1]; }
};

template <typename T>
Operand<T> make_operand(int64_t rows, int64_t cols, const std::string& layout) {
  Operand<T> op;
  size_t size = rows * cols;
  if (layout == "strided") size = rows * cols * 2;
  if (layout == "misaligned") size = rows * cols + 1;
  op.storage.resize(size);
  for (auto& v : op.storage) v = static_cast<T>(uniform());
  op.data = op.storage.data() + (layout == "misaligned" ? 1 : 0);
  if (layout == "row" || layout == "misaligned") op.s0 = cols, op.s1 = 1;
  else if (layout == "col") op.s0 = 1, op.s1 = rows;
  else op.s0 = 2 * cols, op.s1 = 2; // strided
  return op;
}

unsigned blocks(int64_t extent, int per_block) {
  return static_cast<unsigned>((extent + per_block - 1) / per_block);
}

std::set<std::pair<int, int>> layouts_seen;

template <typename T, Layout LA>
void run_register_blocked_b(const GemmArgs<T>& g, dim3 grid) {
  switch (layout_of_b(g)) {
    case Layout::RowMajor: return emu::launch(grid, dim3(rb::kThreads), [&] { matmul_register_blocked_kernel<T, LA, Layout::RowMajor>(g); });
    case Layout::ColMajor: return emu::launch(grid, dim3(rb::kThreads), [&] { matmul_register_blocked_kernel<T, LA, Layout::ColMajor>(g); });
    case Layout::Strided: return emu::launch(grid, dim3(rb::kThreads), [&] { matmul_register_blocked_kernel<T, LA, Layout::Strided>(g); });
  }
}

// Same grid and block shapes as csrc/cuda/matmul_cuda.cu.
template <typename T>
void run(const std::string& kernel, const GemmArgs<T>& g) {
  if (kernel == "naive") {
    emu::launch(dim3(blocks(g.m, kNaiveBlock), blocks(g.n, kNaiveBlock)), dim3(kNaiveBlock, kNaiveBlock),
                [&] { matmul_naive_kernel<T>(g); });
  } else if (kernel == "coalesced") {
    emu::launch(dim3(blocks(g.m, kCoalescedBlockY), blocks(g.n, kCoalescedBlockX)),
                dim3(kCoalescedBlockX, kCoalescedBlockY), [&] { matmul_coalesced_kernel<T>(g); });
  } else if (kernel == "tiled") {
    emu::launch(dim3(blocks(g.m, kTile), blocks(g.n, kTile)), dim3(kTile, kTile), [&] { matmul_tiled_kernel<T>(g); });
  } else {
    const dim3 grid(blocks(g.m, rb::BM), blocks(g.n, rb::BN));
    const Layout la = layout_of_a(g);
    layouts_seen.insert({static_cast<int>(la), static_cast<int>(layout_of_b(g))});
    switch (la) {
      case Layout::RowMajor: return run_register_blocked_b<T, Layout::RowMajor>(g, grid);
      case Layout::ColMajor: return run_register_blocked_b<T, Layout::ColMajor>(g, grid);
      case Layout::Strided: return run_register_blocked_b<T, Layout::Strided>(g, grid);
    }
  }
}

template <typename T>
int check(const std::string& kernel, int64_t m, int64_t k, int64_t n, const std::string& la, const std::string& lb, bool with_bias) {
  const Operand<T> A = make_operand<T>(m, k, la), B = make_operand<T>(k, n, lb);
  std::vector<T> bias(2 * n);
  for (auto& v : bias) v = static_cast<T>(uniform());
  std::vector<T> C(m * n, static_cast<T>(12345)); // garbage: every element must be written
  GemmArgs<T> g{m, n, k, A.data, A.s0, A.s1, B.data, B.s0, B.s1, with_bias ? bias.data() : nullptr, 2, C.data()};
  run<T>(kernel, g);
  const double tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * (k + 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = with_bias ? static_cast<double>(bias[2 * j]) : 0.0;
      for (int64_t p = 0; p < k; ++p) ref += static_cast<double>(A.at(i, p)) * static_cast<double>(B.at(p, j));
      if (!(std::fabs(C[i * n + j] - ref) <= tol)) {
        std::printf("FAIL %s %s m=%ld k=%ld n=%ld A=%s B=%s bias=%d order=%s: C[%ld,%ld]=%g expected %g\n",
                    kernel.c_str(), sizeof(T) == 4 ? "float" : "double", (long)m, (long)k, (long)n, la.c_str(),
                    lb.c_str(), with_bias, emu::reverse_order ? "reverse" : "forward", (long)i, (long)j,
                    static_cast<double>(C[i * n + j]), ref);
        return 1;
      }
    }
  return 0;
}

} // namespace

struct Case {
  const char* kernel;
  std::vector<std::array<int64_t, 3>> shapes;
  std::vector<std::pair<const char*, const char*>> layouts;
  bool both_orders; // kernels with __syncthreads: run phases forward and reversed
};

int main() {
  const std::vector<std::array<int64_t, 3>> all_shapes = {
      {1, 1, 1}, {4, 4, 4}, {7, 13, 11}, {3, 40, 5}, {67, 13, 70}, {128, 8, 128}, {129, 17, 131}, {136, 24, 200}};
  const char* layouts[] = {"row", "col", "strided", "misaligned"};
  std::vector<std::pair<const char*, const char*>> all_layouts;
  for (const char* la : layouts)
    for (const char* lb : layouts) all_layouts.push_back({la, lb});
  const std::vector<std::pair<const char*, const char*>> some_layouts = {
      {"row", "row"}, {"col", "col"}, {"strided", "misaligned"}, {"misaligned", "strided"}};
  // The simple kernels index with plain strides, so a few layouts cover
  // them; the tiled kernel's 1024-thread blocks are slow to emulate.
  const std::vector<Case> cases = {
      {"naive", all_shapes, some_layouts, false},
      {"coalesced", all_shapes, some_layouts, false},
      {"tiled", {{1, 1, 1}, {7, 13, 11}, {3, 70, 5}, {40, 33, 35}}, some_layouts, true},
      {"register_blocked", all_shapes, all_layouts, true},
  };
  int failures = 0, runs = 0;
  for (const Case& c : cases)
    for (bool reverse : {false, true}) {
      if (reverse && !c.both_orders) continue;
      emu::reverse_order = reverse;
      for (const auto& s : c.shapes)
        for (const auto& [la, lb] : c.layouts) {
          const bool bias = (runs % 4) == 0;
          failures += check<float>(c.kernel, s[0], s[1], s[2], la, lb, bias);
          failures += check<double>(c.kernel, s[0], s[1], s[2], la, lb, !bias);
          runs += 2;
        }
    }
  // Every tile-loading path of the register-blocked kernel must have run.
  if (layouts_seen.size() != 9) {
    std::printf("FAIL only %zu of 9 (A, B) layout combinations exercised\n", layouts_seen.size());
    ++failures;
  }
  std::printf("%d runs, %d failures\n", runs, failures);
  return failures == 0 ? 0 : 1;
}
