// The contract between the packed GEMM driver (matmul_cpu.cpp) and the
// per-instruction-set micro-kernels (microkernel_*.cpp). Deliberately free of
// ATen headers: the micro-kernel files are compiled for AVX-512 / AVX2 with a
// target pragma (GCC's, or Clang's attribute pragma), and inline code shared
// with the rest of the library must not be compiled for an instruction set the CPU might lack.
#pragma once

#include <cstdint>

namespace mylinearops::cpu {

// Cache lines a micro-kernel pulls toward L2 while it computes, one per k
// step (the first `lines` steps): a slice of the panel of B that the next
// calls will read. BLIS's micro-kernels take the same hint ("b_next").
// Empty by default: nothing is fetched.
constexpr int64_t kCacheLineBytes = 64; // x86's; a wrong guess costs speed, never results
struct L2Prefetch {
  const void* begin = nullptr;
  int64_t lines = 0;
};

// Computes an mr x nr tile of C from a micro-panel of A and a panel of B:
//   acc[i][j] = sum_p a[i * a_rs + p * a_cs] * b[p * b_rs + j]
//   accumulate ? C += acc : C = acc + (bias ? bias[j] : 0)
// A is read in place through its strides (a packed panel is a_rs = 1,
// a_cs = mr); B's rows are contiguous (a packed panel, b_rs = nr, or B in
// place). C is row-major with leading dimension ldc; bias is contiguous.
// `next` by reference: passed by value, it was copied with one 16-byte load
// of the two 8-byte words the caller had just pushed, a load that store
// forwarding cannot serve, and products with k = 10 ran 10% slower on a Zen 4.
template <typename T>
using MicroKernelFn = void (*)(
    int64_t kc, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs, T* c, int64_t ldc,
    const T* bias, bool accumulate, const L2Prefetch& next);

// The same for the first `cols` columns of the tile only (0 < cols <= nr): B,
// bias and C are read, and C written, only in those columns, so a ragged last
// panel of B can be read in place, unpadded, and C written without a scratch
// tile. Instruction sets with masked loads and stores (AVX-512) have one.
template <typename T>
using MicroKernelColsFn = void (*)(
    int64_t kc, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs, T* c, int64_t ldc,
    const T* bias, bool accumulate, const L2Prefetch& next, int cols);

// A micro-kernel and its register tile. The cache blocks around it are not
// constants: cpu_features.cpp derives them from the running CPU's caches.
template <typename T>
struct MicroKernel {
  const char* isa; // "avx512", "avx2", "generic"
  int mr, nr;      // register tile: mr rows x nr columns of C
  MicroKernelFn<T> fn;
  MicroKernelColsFn<T> partial_fn = nullptr; // nullptr: ragged columns go through a padded panel
  int partial_step = 0; // partial_fn computes the columns asked for rounded up to this (one vector)
};

// A loop of independent vector FMAs on registers only, to measure the compute
// ceiling of an instruction set (cpu_features.cpp times it). Returns a value
// computed from every accumulator so that the compiler cannot drop the work.
struct FmaLoop {
  const char* isa;
  int64_t flops_per_iteration; // accumulators x vector width x 2
  float (*fn)(int64_t iterations, float x, float y);
};

// Each returns nullptr when the build has no such kernel (e.g. not x86-64).
// Whether the running CPU can execute it is checked by the caller.
const MicroKernel<float>* avx512_kernel_f32();
const MicroKernel<double>* avx512_kernel_f64();
const MicroKernel<float>* avx512_kernel_f32_8x48(); // a second float tile: 8 x 48 (three vectors wide)
const MicroKernel<float>* avx2_kernel_f32();
const MicroKernel<double>* avx2_kernel_f64();
const MicroKernel<float>* generic_kernel_f32();
const MicroKernel<double>* generic_kernel_f64();
const FmaLoop* avx512_fma_loop();
const FmaLoop* avx2_fma_loop();
const FmaLoop* generic_fma_loop();

} // namespace mylinearops::cpu
