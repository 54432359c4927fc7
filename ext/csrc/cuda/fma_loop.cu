// The GPU's FP32 ceiling, measured: every thread runs independent chains of
// fused multiply-adds, enough of them per SM that the FP32 units never wait
// for a result. The kernels' GFLOP/s are reported as a share of what this
// loop reaches on the same GPU, not of a datasheet figure.
#include <cstdint>

#include "../mylinearops.h"
#include "../runtime.h"

namespace mylinearops::cuda {
namespace {

// [book:cuda-fma-loop]
// 8 independent chains per thread hide the FMA latency (about 4 cycles);
// 16 unrolled steps per loop turn make the loop counter's own instructions
// about 1 in 130 of those issued.
constexpr int kFmaChains = 8, kFmaUnroll = 16, kFmaBlock = 256;

__global__ void __launch_bounds__(kFmaBlock) fma_loop_kernel(float* out, int64_t n, int64_t iterations, float a, float b) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x[kFmaChains];
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) x[c] = static_cast<float>(c + 1);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma unroll
    for (int u = 0; u < kFmaUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < kFmaChains; ++c) x[c] = __fmaf_rn(x[c], a, b);
    }
  }
  float sum = 0.0f; // stored, so that no chain is dead code
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) sum += x[c];
  out[i] = sum;
}
// [/book:cuda-fma-loop]

} // namespace

int64_t fma_loop(float* out, int64_t n, int64_t iterations, float a, float b, int device_index) {
  const int64_t blocks = (n + kFmaBlock - 1) / kFmaBlock;
  MYLINEAROPS_CHECK(blocks <= INT32_MAX, "mylinearops.cuda_fma_loop: ", n, " threads are too many for one grid");
  const cudaStream_t stream = runtime::current_cuda_stream(device_index);
  fma_loop_kernel<<<static_cast<unsigned>(blocks), kFmaBlock, 0, stream>>>(out, n, iterations, a, b);
  MYLINEAROPS_KERNEL_LAUNCH_CHECK();
  return 2 * int64_t{kFmaChains} * kFmaUnroll * iterations * n;
}

} // namespace mylinearops::cuda
