// The contract between the packed GEMM driver (matmul_cpu.cpp) and the
// per-instruction-set micro-kernels (microkernel_*.cpp). Deliberately free of
// ATen headers: the micro-kernel files are compiled for AVX-512 / AVX2 with
// `#pragma GCC target`, and inline code shared with the rest of the library
// must not be compiled for an instruction set the CPU might lack.
#pragma once

#include <cstdint>

namespace mylinearops::cpu {

// Computes an mr x nr tile of C from packed panels:
//   acc[i][j] = sum_p a_panel[p * mr + i] * b_panel[p * nr + j]
//   accumulate ? C += acc : C = acc + (bias ? bias[j] : 0)
// C is row-major with leading dimension ldc; bias is contiguous.
template <typename T>
using MicroKernelFn = void (*)(
    int64_t kc, const T* a_panel, const T* b_panel, T* c, int64_t ldc,
    const T* bias, bool accumulate);

// A micro-kernel and the cache-block sizes tuned for it.
template <typename T>
struct MicroKernel {
  const char* isa; // "avx512", "avx2", "generic"
  int mr, nr;      // register tile: mr rows x nr columns of C
  int kc, mc, nc;  // cache blocks: kc x nr B panel in L1, mc x kc A block in L2
  MicroKernelFn<T> fn;
};

// Each returns nullptr when the build has no such kernel (e.g. not x86-64).
// Whether the running CPU can execute it is checked by the caller.
const MicroKernel<float>* avx512_kernel_f32();
const MicroKernel<double>* avx512_kernel_f64();
const MicroKernel<float>* avx2_kernel_f32();
const MicroKernel<double>* avx2_kernel_f64();
const MicroKernel<float>* generic_kernel_f32();
const MicroKernel<double>* generic_kernel_f64();

} // namespace mylinearops::cpu
