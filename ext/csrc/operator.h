// The operator layer both builds share: input checks, the `algo=` names, and
// the call into the kernels. It sees a tensor only as an Operand (shape,
// strides, dtype, device, data pointer), which each front end fills from its
// own tensor type: at::Tensor in mylinearops.cpp (regular build),
// torch::stable::Tensor in stable/mylinearops_stable.cpp (stable-ABI build).
// So both builds check the same things and say the same words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mylinearops.h"

namespace mylinearops {

enum class Dtype { Float32, Float64, Unsupported };
enum class DeviceKind { Cpu, Cuda, Other };

struct Operand {
  std::vector<int64_t> sizes, strides;
  Dtype dtype;
  std::string dtype_name; // as Python spells it: "float32", "int64"
  DeviceKind device;
  int device_index;        // -1 for the CPU
  std::string device_name; // as Python prints it: "cpu", "cuda:0"
  const void* data;

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t size(int64_t d) const { return sizes[d]; }
};

// Names used in error messages, so that matmul talks about A and B and
// linearop about X, W and b (the names the Python API uses).
struct OpNames {
  const char* op;
  const char* a;
  const char* b;
  const char* bias;
};
inline constexpr OpNames kMatmul{"mylinearops.matmul", "A", "B", "bias"};
inline constexpr OpNames kLinearop{"mylinearops.linearop", "X", "W", "b"};

// Raises (TypeError/ValueError/RuntimeError in the regular build, RuntimeError
// in the stable one) with a message naming the argument and what is wrong.
void check_inputs(const OpNames& names, const Operand& A, const Operand& B, const Operand* bias);
Algo parse_algo(const OpNames& names, std::string_view algo, DeviceKind device);

// C (m x n, contiguous, same dtype and device as A) = A @ B (+ bias). The
// caller has checked the inputs, chosen the algo, allocated C and, for CUDA,
// made A's device current.
void run_gemm(Algo algo, const Operand& A, const Operand& B, const Operand* bias, void* C);

// Functions behind the library's introspection operators (see the schemas).
std::string build_info(const std::string& abi);
std::string cpu_info();
double cpu_fma_peak(std::string_view isa, int64_t threads, double seconds);
int64_t cpu_fma_loop(std::string_view isa, int64_t threads, int64_t iterations);
double cpu_microkernel_gflops(std::string_view isa, double seconds);
double cpu_clock_ghz(double seconds);
// The GPU's FMA-throughput loop on `out` (a contiguous float32 CUDA vector,
// one element per thread): see cuda/fma_loop.cu. Returns the FLOPs done.
int64_t cuda_fma_loop(const Operand& out, int64_t iterations, double a, double b);

} // namespace mylinearops
