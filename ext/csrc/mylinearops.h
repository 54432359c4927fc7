// Declarations shared by the operator layer (mylinearops.cpp) and the
// backends (cpu/, cuda/). Everything that touches at::Tensor lives in
// mylinearops.cpp; the backends receive raw pointers and strides.
#pragma once

#include <cstdint>
#include <string>

namespace mylinearops {

// Every kernel variant the library ships. The string names (see
// mylinearops.cpp) are what Python passes as `algo=`.
enum class Algo {
  CpuReference,     // plain triple loop
  CpuBlocked,       // cache-blocked i-k-j loops, parallel over row blocks
  CpuPacked,        // packed panels + register-blocked micro-kernel (best ISA)
  CpuPackedAvx512,  // ... forcing the AVX-512 micro-kernel
  CpuPackedAvx2,    // ... forcing the AVX2+FMA micro-kernel
  CpuPackedGeneric, // ... forcing the portable micro-kernel
  CudaNaive,           // the notes' kernel: threadIdx.x walks rows (uncoalesced)
  CudaCoalesced,       // threadIdx.x walks columns
  CudaTiled,           // shared-memory tiles
  CudaRegisterBlocked, // 128x128 tiles, 8x8 per thread, vector loads, double buffer
};

// C (m x n, contiguous, row-major) = A (m x k) @ B (k x n) [+ bias (n)].
// A, B and bias may have any strides (transposed views, slices, stride 0).
// Element (i, p) of A is a[i * a_stride0 + p * a_stride1].
template <typename T>
struct GemmArgs {
  int64_t m, n, k;
  const T* a;
  int64_t a_stride0, a_stride1;
  const T* b;
  int64_t b_stride0, b_stride1;
  const T* bias; // nullptr: no bias
  int64_t bias_stride;
  T* c;
};

// CPU backend (cpu/matmul_cpu.cpp). Requires k > 0, m > 0, n > 0.
template <typename T>
void cpu_gemm(Algo algo, const GemmArgs<T>& args);

// Names of the CPU micro-kernels this build + this CPU can run, best first
// (e.g. "avx512,avx2,generic").
const char* cpu_microkernels();
// The plan of the last `packed` product run on this thread (blocks, thread
// grid, what was packed, elements copied), as "key=value;..." text.
std::string cpu_last_gemm_plan();
bool cpu_supports(Algo algo);

#ifdef MYLINEAROPS_WITH_CUDA
// CUDA backend (cuda/matmul_cuda.cu). Launches on the current stream of
// device_index; the caller makes that device current.
template <typename T>
void cuda_gemm(Algo algo, const GemmArgs<T>& args, int device_index);

namespace cuda {
// The FP32 FMA-throughput loop (cuda/fma_loop.cu): one thread per element of
// out (n floats), each running 8 chains x = fma(x, a, b) for 16 * iterations
// steps from x = 1..8, then storing the chains' sum. Returns the FLOPs done.
int64_t fma_loop(float* out, int64_t n, int64_t iterations, float a, float b, int device_index);
} // namespace cuda
#endif

} // namespace mylinearops
