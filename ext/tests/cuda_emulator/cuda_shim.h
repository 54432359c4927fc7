// Just enough of CUDA to run the kernels of csrc/cuda/matmul_kernels.cuh on
// the CPU, for machines without a GPU. Each thread of a block is a coroutine
// (ucontext) on one OS thread; __syncthreads() returns to a scheduler that
// runs every thread up to the barrier, in forward or reverse thread order.
// Running the phases in both orders exposes shared-memory races (a read that
// is not separated from its write by a barrier sees the wrong value in one
// of the two orders), and the scheduler checks that all threads of a block
// reach the same barriers. What it cannot check: warp-level behaviour and
// the memory model (the kernels use neither warp intrinsics nor atomics).
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};

namespace emu {

inline dim3 thread_idx, block_idx, block_dim, grid_dim;
inline bool reverse_order = false;

struct Thread {
  ucontext_t context;
  std::vector<char> stack;
  bool finished = false;
};
inline ucontext_t scheduler;
inline std::vector<Thread>* threads = nullptr;
inline size_t current = 0;
inline const std::function<void()>* body = nullptr;

inline void thread_entry() {
  (*body)();
  (*threads)[current].finished = true;
  // returning resumes uc_link (the scheduler)
}

inline void syncthreads() {
  swapcontext(&(*threads)[current].context, &scheduler);
}

// Runs `kernel` over the grid, one block at a time.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  std::vector<Thread> pool(n);
  threads = &pool;
  body = &kernel;
  grid_dim = grid;
  block_dim = block;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        block_idx = dim3(bx, by, bz);
        for (auto& t : pool) {
          t.finished = false;
          t.stack.resize(64 * 1024);
          getcontext(&t.context);
          t.context.uc_stack.ss_sp = t.stack.data();
          t.context.uc_stack.ss_size = t.stack.size();
          t.context.uc_link = &scheduler;
          makecontext(&t.context, thread_entry, 0);
        }
        for (;;) { // one phase: every live thread runs to its next barrier or its end
          for (size_t step = 0; step < n; ++step) {
            current = reverse_order ? n - 1 - step : step;
            Thread& t = pool[current];
            if (t.finished) continue;
            thread_idx = dim3(current % block.x, (current / block.x) % block.y, current / (block.x * block.y));
            swapcontext(&scheduler, &t.context);
          }
          size_t finished = 0;
          for (auto& t : pool) finished += t.finished;
          if (finished == n) break;
          if (finished != 0) { // on a GPU: a hang or undefined behaviour
            std::fprintf(stderr, "barrier divergence: %zu of %zu threads exited while others wait at __syncthreads\n", finished, n);
            std::exit(2);
          }
        }
      }
  threads = nullptr;
}

} // namespace emu

#define threadIdx (emu::thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::syncthreads()
