// Launch of the register-blocked kernel: picks, per operand, the tile-loading
// code that matches its memory layout (see Layout in matmul_kernels.cuh).
#include <cstdint>

#include "../mylinearops.h"
#include "../runtime.h"
#include "matmul_kernels.cuh"

namespace mylinearops::cuda {
namespace {

template <typename T, Layout LA, Layout LB>
void launch(const GemmArgs<T>& g, dim3 grid, cudaStream_t stream) {
  matmul_register_blocked_kernel<T, LA, LB><<<grid, rb::kThreads, 0, stream>>>(g);
  MYLINEAROPS_KERNEL_LAUNCH_CHECK();
}

template <typename T, Layout LA>
void launch_for_b(const GemmArgs<T>& g, dim3 grid, cudaStream_t stream) {
  switch (layout_of_b(g)) {
    case Layout::RowMajor: return launch<T, LA, Layout::RowMajor>(g, grid, stream);
    case Layout::ColMajor: return launch<T, LA, Layout::ColMajor>(g, grid, stream);
    case Layout::Strided: return launch<T, LA, Layout::Strided>(g, grid, stream);
  }
}

} // namespace

template <typename T>
void launch_register_blocked(const GemmArgs<T>& g, cudaStream_t stream) {
  const int64_t row_blocks = (g.m + rb::BM - 1) / rb::BM, col_blocks = (g.n + rb::BN - 1) / rb::BN;
  MYLINEAROPS_CHECK(
      col_blocks <= 65535 && row_blocks <= INT32_MAX, "mylinearops: a ", g.m, " x ", g.n,
      " output is too large for the register_blocked CUDA kernel's grid (at most ",
      65535 * rb::BN, " columns)");
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(col_blocks));
  switch (layout_of_a(g)) {
    case Layout::RowMajor: return launch_for_b<T, Layout::RowMajor>(g, grid, stream);
    case Layout::ColMajor: return launch_for_b<T, Layout::ColMajor>(g, grid, stream);
    case Layout::Strided: return launch_for_b<T, Layout::Strided>(g, grid, stream);
  }
}

template void launch_register_blocked<float>(const GemmArgs<float>&, cudaStream_t);
template void launch_register_blocked<double>(const GemmArgs<double>&, cudaStream_t);

} // namespace mylinearops::cuda
