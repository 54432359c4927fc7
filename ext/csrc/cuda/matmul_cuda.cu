// CUDA backend: launches the kernels of matmul_kernels.cuh on the current
// stream and checks every launch. The device guard is set by the caller
// (the operator layer, which also passes the device index).
#include <cstdint>

#include "../mylinearops.h"
#include "../runtime.h"
#include "matmul_kernels.cuh"

namespace mylinearops {
namespace cuda {

// Defined in matmul_register_blocked.cu (a file of its own so its 18
// template instantiations compile in parallel with this one).
template <typename T>
void launch_register_blocked(const GemmArgs<T>& g, cudaStream_t stream);

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Rows of C map to blockIdx.x (limit 2^31 - 1), columns to blockIdx.y
// (limit 65535): a huge batch is fine, a huge n gets a clear error.
dim3 grid_for(const char* kernel, int64_t m, int64_t n, int64_t rows_per_block, int64_t cols_per_block) {
  const int64_t row_blocks = ceil_div(m, rows_per_block), col_blocks = ceil_div(n, cols_per_block);
  MYLINEAROPS_CHECK(
      col_blocks <= 65535 && row_blocks <= INT32_MAX, "mylinearops: a ", m, " x ", n,
      " output is too large for the ", kernel, " CUDA kernel's grid (at most ", 65535 * cols_per_block,
      " columns)");
  return dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(col_blocks));
}

} // namespace
} // namespace cuda

template <typename T>
void cuda_gemm(Algo algo, const GemmArgs<T>& g, int device_index) {
  const cudaStream_t stream = runtime::current_cuda_stream(device_index);
  switch (algo) {
    case Algo::CudaNaive: {
      // [book:cuda-naive-launch]
      const dim3 block(cuda::kNaiveBlock, cuda::kNaiveBlock); // block.x -> rows, as in the notes
      const dim3 grid = cuda::grid_for("naive", g.m, g.n, cuda::kNaiveBlock, cuda::kNaiveBlock);
      cuda::matmul_naive_kernel<T><<<grid, block, 0, stream>>>(g);
      MYLINEAROPS_KERNEL_LAUNCH_CHECK();
      // [/book:cuda-naive-launch]
      return;
    }
    case Algo::CudaCoalesced: {
      // block.x -> 32 consecutive columns = one warp
      const dim3 block(cuda::kCoalescedBlockX, cuda::kCoalescedBlockY);
      const dim3 grid = cuda::grid_for("coalesced", g.m, g.n, cuda::kCoalescedBlockY, cuda::kCoalescedBlockX);
      cuda::matmul_coalesced_kernel<T><<<grid, block, 0, stream>>>(g);
      MYLINEAROPS_KERNEL_LAUNCH_CHECK();
      return;
    }
    case Algo::CudaTiled: {
      const dim3 block(cuda::kTile, cuda::kTile);
      const dim3 grid = cuda::grid_for("tiled", g.m, g.n, cuda::kTile, cuda::kTile);
      cuda::matmul_tiled_kernel<T><<<grid, block, 0, stream>>>(g);
      MYLINEAROPS_KERNEL_LAUNCH_CHECK();
      return;
    }
    case Algo::CudaRegisterBlocked:
      cuda::launch_register_blocked<T>(g, stream);
      return;
    default:
      MYLINEAROPS_CHECK(false, "mylinearops: not a CUDA algo");
  }
}

template void cuda_gemm<float>(Algo, const GemmArgs<float>&, int);
template void cuda_gemm<double>(Algo, const GemmArgs<double>&, int);

} // namespace mylinearops
