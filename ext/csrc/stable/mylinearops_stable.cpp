// The stable-ABI build's front end: the same operators, schemas and kernels
// as mylinearops.cpp, written against the LibTorch stable ABI only
// (torch::stable::Tensor, STABLE_TORCH_LIBRARY, TORCH_BOX). Compiled with
// -DTORCH_TARGET_VERSION=2.10, it calls nothing newer than torch 2.10 offers,
// and every call into libtorch goes through a versioned C function, so the
// one binary loads into any torch >= 2.10.
//
// What it gives up, against the regular front end:
//   - at::Tensor and its methods (t.options(), t.sizes() << ...): a stable
//     tensor is an opaque handle with a few accessors, and ATen ops are the
//     wrappers in torch/csrc/stable/ops.h (here only new_empty);
//   - C++ autograd (torch::autograd::Function): the formulas are registered
//     from Python (mylinearops/ops.py, torch.library.register_autograd);
//   - typed errors: only std::exception crosses the ABI, so a bad argument is
//     a RuntimeError, not a TypeError or ValueError;
//   - string arguments arrive as std::string (a copy), not string_view.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <optional>
#include <string>
#include <vector>

#include "../operator.h"

namespace mylinearops {
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Python's dtype names (the regular build asks c10::getDtypeNames).
std::string dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Half: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Bool: return "bool";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    default: return torch::headeronly::toString(t);
  }
}

Operand operand(const Tensor& t) {
  const ScalarType dt = t.scalar_type();
  const bool cpu = t.is_cpu(), cuda = t.is_cuda();
  const int index = cpu ? -1 : static_cast<int>(t.get_device_index());
  const auto sizes = t.sizes(), strides = t.strides();
  return Operand{
      std::vector<int64_t>(sizes.begin(), sizes.end()),
      std::vector<int64_t>(strides.begin(), strides.end()),
      dt == ScalarType::Float ? Dtype::Float32 : dt == ScalarType::Double ? Dtype::Float64 : Dtype::Unsupported,
      dtype_name(dt),
      cpu ? DeviceKind::Cpu : cuda ? DeviceKind::Cuda : DeviceKind::Other,
      index,
      cpu ? std::string("cpu") : cuda ? "cuda:" + std::to_string(index) : std::string("other"),
      t.const_data_ptr(),
  };
}

// [book:stable-op-body]
Tensor linear_forward(
    const OpNames& names, const Tensor& A, const Tensor& B, const std::optional<Tensor>& bias,
    const std::string& algo_name) {
  const Operand a = operand(A), b = operand(B);
  const std::optional<Operand> bias_operand = bias ? std::optional<Operand>(operand(*bias)) : std::nullopt;
  const Operand* bias_ptr = bias_operand ? &*bias_operand : nullptr;
  check_inputs(names, a, b, bias_ptr);
  const Algo algo = parse_algo(names, algo_name, a.device);
  const std::vector<int64_t> size{a.size(0), b.size(1)};
  Tensor C = torch::stable::new_empty(A, size); // A's dtype and device
  if (C.numel() == 0) return C;
  std::optional<torch::stable::accelerator::DeviceGuard> device_guard;
  if (a.device == DeviceKind::Cuda) device_guard.emplace(a.device_index);
  run_gemm(algo, a, b, bias_ptr, C.mutable_data_ptr());
  return C;
}
// [/book:stable-op-body]

Tensor matmul(Tensor A, Tensor B, std::string algo) {
  return linear_forward(kMatmul, A, B, std::nullopt, algo);
}

Tensor linearop(Tensor X, Tensor W, std::optional<Tensor> b, std::string algo) {
  return linear_forward(kLinearop, X, W, b, algo);
}

int64_t fma_loop_op(Tensor out, int64_t iterations, double a, double b) {
  const Operand o = operand(out);
  std::optional<torch::stable::accelerator::DeviceGuard> device_guard;
  if (o.device == DeviceKind::Cuda) device_guard.emplace(o.device_index);
  return cuda_fma_loop(o, iterations, a, b);
}

std::string stable_build_info() {
  return build_info("stable");
}
std::string stable_cpu_info() {
  return cpu_info();
}
std::string stable_cpu_last_gemm_plan() {
  return cpu_last_gemm_plan();
}
double stable_cpu_fma_peak(std::string isa, int64_t threads, double seconds) {
  return cpu_fma_peak(isa, threads, seconds);
}
double stable_cpu_clock_ghz(double seconds) {
  return cpu_clock_ghz(seconds);
}
int64_t stable_cpu_fma_loop(std::string isa, int64_t threads, int64_t iterations) {
  return cpu_fma_loop(isa, threads, iterations);
}
double stable_cpu_microkernel_gflops(std::string isa, double seconds) {
  return cpu_microkernel_gflops(isa, seconds);
}

} // namespace

// [book:stable-schemas]
// The schemas, character for character those of mylinearops.cpp.
STABLE_TORCH_LIBRARY(mylinearops, m) {
  m.def("matmul(Tensor A, Tensor B, str algo=\"auto\") -> Tensor");
  m.def("linearop(Tensor X, Tensor W, Tensor? b=None, str algo=\"auto\") -> Tensor");
  m.def("build_info() -> str");
  m.def("cpu_info() -> str");
  m.def("cpu_fma_peak(str isa, int threads, float seconds=0.05) -> float");
  m.def("cpu_last_gemm_plan() -> str");
  m.def("cpu_clock_ghz(float seconds=0.02) -> float");
  m.def("cpu_fma_loop(str isa, int threads, int iterations) -> int");
  m.def("cpu_microkernel_gflops(str isa, float seconds=0.05) -> float");
  m.def("cuda_fma_loop(Tensor(a!) out, int iterations, float a=0.9999, float b=0.0001) -> int");
}

STABLE_TORCH_LIBRARY_IMPL(mylinearops, CPU, m) {
  m.impl("matmul", TORCH_BOX(&matmul));
  m.impl("linearop", TORCH_BOX(&linearop));
  m.impl("cuda_fma_loop", TORCH_BOX(&fma_loop_op));
}

STABLE_TORCH_LIBRARY_IMPL(mylinearops, CUDA, m) {
  m.impl("matmul", TORCH_BOX(&matmul));
  m.impl("linearop", TORCH_BOX(&linearop));
  m.impl("cuda_fma_loop", TORCH_BOX(&fma_loop_op));
}

// No tensor arguments, so no device to dispatch on: one kernel for every key.
STABLE_TORCH_LIBRARY_IMPL(mylinearops, CompositeExplicitAutograd, m) {
  m.impl("build_info", TORCH_BOX(&stable_build_info));
  m.impl("cpu_info", TORCH_BOX(&stable_cpu_info));
  m.impl("cpu_fma_peak", TORCH_BOX(&stable_cpu_fma_peak));
  m.impl("cpu_last_gemm_plan", TORCH_BOX(&stable_cpu_last_gemm_plan));
  m.impl("cpu_clock_ghz", TORCH_BOX(&stable_cpu_clock_ghz));
  m.impl("cpu_fma_loop", TORCH_BOX(&stable_cpu_fma_loop));
  m.impl("cpu_microkernel_gflops", TORCH_BOX(&stable_cpu_microkernel_gflops));
}
// [/book:stable-schemas]

} // namespace mylinearops
