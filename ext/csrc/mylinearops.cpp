// The regular build's front end: at::Tensor in and out, registered with
// TORCH_LIBRARY. It turns tensors into Operands for the shared operator
// layer (operator.h: checks, algo names, the call into the kernels), so the
// stable-ABI build (stable/mylinearops_stable.cpp) behaves the same.
//
// Only the headers used, as in PyTorch's own sources: at::Tensor with its
// methods, and one header per free function (ATen/ops/). ATen/ATen.h declares
// every ATen operator, parsed on every build and never used here;
// TORCH_ASSERT_ONLY_METHOD_OPERATORS makes including it an error.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "operator.h"

namespace mylinearops {
namespace {

Operand operand(const at::Tensor& t) {
  const at::ScalarType dt = t.scalar_type();
  return Operand{
      t.sizes().vec(),
      t.strides().vec(),
      dt == at::kFloat ? Dtype::Float32 : dt == at::kDouble ? Dtype::Float64 : Dtype::Unsupported,
      std::string(c10::getDtypeNames(dt).first), // "float32", not "Float"
      t.is_cpu() ? DeviceKind::Cpu : t.is_cuda() ? DeviceKind::Cuda : DeviceKind::Other,
      t.is_cpu() ? -1 : static_cast<int>(t.get_device()),
      t.device().str(),
      t.const_data_ptr(),
  };
}

// [book:op-body]
// C = A @ B (+ bias). The same function serves the CPU and the CUDA
// dispatch keys; the device of the inputs picks the backend.
at::Tensor linear_forward(
    const OpNames& names,
    const at::Tensor& A,
    const at::Tensor& B,
    const std::optional<at::Tensor>& bias,
    c10::string_view algo_name) {
  const Operand a = operand(A), b = operand(B);
  const std::optional<Operand> bias_operand = bias ? std::optional<Operand>(operand(*bias)) : std::nullopt;
  const Operand* bias_ptr = bias_operand ? &*bias_operand : nullptr;
  check_inputs(names, a, b, bias_ptr);
  const Algo algo = parse_algo(names, algo_name, a.device);
  at::Tensor C = at::empty({A.size(0), B.size(1)}, A.options());
  if (C.numel() == 0) return C;
  c10::DeviceGuard device_guard(A.device());
  run_gemm(algo, a, b, bias_ptr, C.mutable_data_ptr());
  return C;
}
// [/book:op-body]

at::Tensor matmul(const at::Tensor& A, const at::Tensor& B, c10::string_view algo) {
  return linear_forward(kMatmul, A, B, std::nullopt, algo);
}

at::Tensor linearop(
    const at::Tensor& X, const at::Tensor& W, const std::optional<at::Tensor>& b,
    c10::string_view algo) {
  return linear_forward(kLinearop, X, W, b, algo);
}

// The GPU's FMA-throughput loop (cuda/fma_loop.cu), on out's device. Also
// registered for CPU tensors, where the operator layer says what is wrong.
int64_t fma_loop_op(const at::Tensor& out, int64_t iterations, double a, double b) {
  std::optional<c10::DeviceGuard> device_guard;
  if (out.is_cuda()) device_guard.emplace(out.device());
  return cuda_fma_loop(operand(out), iterations, a, b);
}

std::string regular_build_info() {
  return build_info("regular");
}

} // namespace

// [book:schemas]
TORCH_LIBRARY(mylinearops, m) {
  m.def("matmul(Tensor A, Tensor B, str algo=\"auto\") -> Tensor");
  m.def("linearop(Tensor X, Tensor W, Tensor? b=None, str algo=\"auto\") -> Tensor");
  m.def("build_info() -> str", &regular_build_info);
  m.def("cpu_info() -> str", &cpu_info);
  m.def("cpu_fma_peak(str isa, int threads, float seconds=0.05) -> float", &cpu_fma_peak);
  m.def("cpu_last_gemm_plan() -> str", &cpu_last_gemm_plan);
  m.def("cpu_clock_ghz(float seconds=0.02) -> float", &cpu_clock_ghz);
  m.def("cpu_fma_loop(str isa, int threads, int iterations) -> int", &cpu_fma_loop);
  m.def("cpu_microkernel_gflops(str isa, float seconds=0.05) -> float", &cpu_microkernel_gflops);
  m.def("cuda_fma_loop(Tensor(a!) out, int iterations, float a=0.9999, float b=0.0001) -> int");
}

TORCH_LIBRARY_IMPL(mylinearops, CPU, m) {
  m.impl("matmul", &matmul);
  m.impl("linearop", &linearop);
  m.impl("cuda_fma_loop", &fma_loop_op);
}

// Registered in every build: without CUDA kernels the operator layer raises a
// clear error instead of the dispatcher's "could not run ... CUDA backend".
TORCH_LIBRARY_IMPL(mylinearops, CUDA, m) {
  m.impl("matmul", &matmul);
  m.impl("linearop", &linearop);
  m.impl("cuda_fma_loop", &fma_loop_op);
}
// [/book:schemas]

} // namespace mylinearops
