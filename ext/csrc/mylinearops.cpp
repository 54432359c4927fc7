// The operator layer: schemas, input checks and algo selection, shared by the
// CPU and CUDA backends. Kernels live in cpu/ and cuda/ and only see raw
// pointers and strides (GemmArgs).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "cpu/cpu_features.h"
#include "cpu/microkernel.h"
#include "mylinearops.h"

namespace mylinearops {
namespace {

// Names used in error messages, so that matmul talks about A and B and
// linearop about X, W and b (the names the Python API uses).
struct OpNames {
  const char* op;
  const char* a;
  const char* b;
  const char* bias;
};
constexpr OpNames kMatmul{"mylinearops.matmul", "A", "B", "bias"};
constexpr OpNames kLinearop{"mylinearops.linearop", "X", "W", "b"};

std::string dtype_name(at::ScalarType t) {
  return std::string(c10::getDtypeNames(t).first); // "float32", not "Float"
}

struct AlgoName {
  std::string_view name;
  c10::DeviceType device;
  Algo algo;
};

// [book:algo-table]
// The `algo=` names. "auto" picks the fastest kernel for the device.
constexpr std::array<AlgoName, 12> kAlgos{{
    {"auto", c10::DeviceType::CPU, Algo::CpuPacked},
    {"reference", c10::DeviceType::CPU, Algo::CpuReference},
    {"blocked", c10::DeviceType::CPU, Algo::CpuBlocked},
    {"packed", c10::DeviceType::CPU, Algo::CpuPacked},
    {"packed_avx512", c10::DeviceType::CPU, Algo::CpuPackedAvx512},
    {"packed_avx2", c10::DeviceType::CPU, Algo::CpuPackedAvx2},
    {"packed_generic", c10::DeviceType::CPU, Algo::CpuPackedGeneric},
    {"auto", c10::DeviceType::CUDA, Algo::CudaRegisterBlocked},
    {"naive", c10::DeviceType::CUDA, Algo::CudaNaive},
    {"coalesced", c10::DeviceType::CUDA, Algo::CudaCoalesced},
    {"tiled", c10::DeviceType::CUDA, Algo::CudaTiled},
    {"register_blocked", c10::DeviceType::CUDA, Algo::CudaRegisterBlocked},
}};
// [/book:algo-table]

std::string algo_names(c10::DeviceType device) {
  std::string out;
  for (const auto& a : kAlgos) {
    if (a.device != device) continue;
    if (!out.empty()) out += ",";
    out += a.name;
  }
  return out;
}

std::string device_type_name(c10::DeviceType device) {
  return c10::DeviceTypeName(device, /*lower_case=*/true);
}

Algo parse_algo(const OpNames& names, std::string_view algo, c10::DeviceType device) {
  const AlgoName* other_device = nullptr;
  for (const auto& a : kAlgos) {
    if (a.name != algo) continue;
    if (a.device == device) {
      TORCH_CHECK_VALUE(
          a.device != c10::DeviceType::CPU || cpu_supports(a.algo),
          names.op, ": algo '", algo, "' needs a CPU instruction set this CPU (or build) lacks",
          cpu::isa_capped() ? std::string(" or MYLINEAROPS_ISA=") + cpu::isa_name(cpu::isa_cap()) + " excludes" : "",
          "; micro-kernels available here: ", cpu_microkernels());
      return a.algo;
    }
    other_device = &a;
  }
  const std::string device_name = device_type_name(device);
  TORCH_CHECK_VALUE(
      other_device == nullptr,
      names.op, ": algo '", algo, "' is a ", device_type_name(other_device ? other_device->device : device),
      " kernel, but the inputs are on ", device_name, "; ", device_name, " algos are: ",
      algo_names(device));
  TORCH_CHECK_VALUE(
      false, names.op, ": unknown algo '", algo, "' for ", device_name,
      " tensors; choose one of: ", algo_names(device));
  return Algo::CpuReference; // unreachable
}

// [book:input-checks]
// One place for every input check, shared by the CPU and CUDA kernels.
// ops.py mirrors these messages in the fake (meta) implementation, and
// tests/test_errors.py checks that both say the same thing.
void check_inputs(
    const OpNames& names,
    const at::Tensor& A,
    const at::Tensor& B,
    const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(
      A.dim() == 2, names.op, ": ", names.a, " must be a 2-D matrix, but got a ",
      A.dim(), "-D tensor of shape ", A.sizes());
  TORCH_CHECK(
      B.dim() == 2, names.op, ": ", names.b, " must be a 2-D matrix, but got a ",
      B.dim(), "-D tensor of shape ", B.sizes());
  auto check_dtype = [&](const char* name, const at::Tensor& t) {
    const auto dt = t.scalar_type();
    TORCH_CHECK_TYPE(
        dt == at::kFloat || dt == at::kDouble, names.op, ": unsupported dtype ",
        dtype_name(dt), " for ", name, " (shape ", t.sizes(),
        "); supported dtypes are float32 and float64");
  };
  check_dtype(names.a, A);
  check_dtype(names.b, B);
  TORCH_CHECK_TYPE(
      A.scalar_type() == B.scalar_type(), names.op, ": ", names.a, " and ", names.b,
      " must have the same dtype, but ", names.a, " is ", dtype_name(A.scalar_type()),
      " ", A.sizes(), " and ", names.b, " is ", dtype_name(B.scalar_type()), " ", B.sizes());
  TORCH_CHECK(
      A.device() == B.device(), names.op, ": ", names.a, " and ", names.b,
      " must be on the same device, but ", names.a, " is on ", A.device(), " and ",
      names.b, " is on ", B.device());
  TORCH_CHECK(
      A.size(1) == B.size(0), names.op, ": inner dimensions differ: ", names.a, " is ",
      A.sizes(), " but ", names.b, " is ", B.sizes());
  if (bias.has_value()) {
    const at::Tensor& b = *bias;
    check_dtype(names.bias, b);
    TORCH_CHECK_TYPE(
        b.scalar_type() == A.scalar_type(), names.op, ": ", names.bias,
        " must have the same dtype as ", names.a, " and ", names.b, " (",
        dtype_name(A.scalar_type()), "), but ", names.bias, " is ",
        dtype_name(b.scalar_type()));
    TORCH_CHECK(
        b.device() == A.device(), names.op, ": ", names.bias, " must be on the same device as ",
        names.a, " and ", names.b, " (", A.device(), "), but ", names.bias, " is on ", b.device());
    TORCH_CHECK(
        b.dim() == 1 && b.size(0) == B.size(1), names.op, ": ", names.bias,
        " must be a 1-D tensor of size ", B.size(1), " (", names.b, " is ", B.sizes(),
        "), but got shape ", b.sizes());
  }
}
// [/book:input-checks]

template <typename T>
GemmArgs<T> gemm_args(
    const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& bias, at::Tensor& C) {
  GemmArgs<T> g{};
  g.m = A.size(0);
  g.k = A.size(1);
  g.n = B.size(1);
  g.a = A.const_data_ptr<T>();
  g.a_stride0 = A.stride(0);
  g.a_stride1 = A.stride(1);
  g.b = B.const_data_ptr<T>();
  g.b_stride0 = B.stride(0);
  g.b_stride1 = B.stride(1);
  g.bias = bias ? bias->const_data_ptr<T>() : nullptr;
  g.bias_stride = bias ? bias->stride(0) : 0;
  g.c = C.mutable_data_ptr<T>();
  return g;
}

// [book:op-body]
// C = A @ B (+ bias). The same function serves the CPU and the CUDA
// dispatch keys; the device of the inputs picks the backend.
at::Tensor linear_forward(
    const OpNames& names,
    const at::Tensor& A,
    const at::Tensor& B,
    const std::optional<at::Tensor>& bias,
    std::string_view algo_name) {
  check_inputs(names, A, B, bias);
  const c10::DeviceType device = A.device().type();
  const Algo algo = parse_algo(names, algo_name, device);
#ifndef MYLINEAROPS_WITH_CUDA
  TORCH_CHECK(
      device != c10::DeviceType::CUDA, names.op, ": this build of mylinearops has no CUDA kernels, ",
      "so it cannot run on ", A.device(), " tensors; rebuild it where nvcc is available ",
      "(MYLINEAROPS_CUDA=1)");
#endif
  const int64_t m = A.size(0), k = A.size(1), n = B.size(1);
  if (m == 0 || n == 0) {
    return at::empty({m, n}, A.options());
  }
  if (k == 0) { // a sum over nothing is 0; clone so the output never aliases bias
    return bias ? bias->unsqueeze(0).expand({m, n}).clone(at::MemoryFormat::Contiguous)
                : at::zeros({m, n}, A.options());
  }
  c10::DeviceGuard device_guard(A.device());
  at::Tensor C = at::empty({m, n}, A.options());
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "mylinearops_gemm", [&] {
    const GemmArgs<scalar_t> args = gemm_args<scalar_t>(A, B, bias, C);
#ifdef MYLINEAROPS_WITH_CUDA
    if (device == c10::DeviceType::CUDA) {
      cuda_gemm<scalar_t>(algo, args);
      return;
    }
#endif
    cpu_gemm<scalar_t>(algo, args);
  });
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

// Facts about this build that Python reads once at import: whether CUDA
// kernels were compiled, the algo names per device, the CPU micro-kernels,
// the compiler, and whether OpenMP was on.
std::string build_info() {
  std::ostringstream out;
#ifdef MYLINEAROPS_WITH_CUDA
  out << "with_cuda=1";
#else
  out << "with_cuda=0";
#endif
  out << ";cpu_algos=" << algo_names(c10::DeviceType::CPU)
      << ";cuda_algos=" << algo_names(c10::DeviceType::CUDA)
      << ";cpu_microkernels=" << cpu_microkernels();
#if defined(__clang__)
  out << ";compiler=clang " << __clang_major__ << "." << __clang_minor__ << "." << __clang_patchlevel__;
#elif defined(__GNUC__)
  out << ";compiler=gcc " << __GNUC__ << "." << __GNUC_MINOR__ << "." << __GNUC_PATCHLEVEL__;
#else
  out << ";compiler=other";
#endif
#ifdef _OPENMP
  out << ";openmp=1"; // without it the CPU kernels run on one thread
#else
  out << ";openmp=0";
#endif
  return out.str();
}

// What the CPU kernels found out about this machine (cpu/cpu_features.h):
// cache sizes and their source, the blocking they imply, the micro-kernel
// `packed` prefers and why. Python parses it into a dict.
std::string cpu_info() {
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  const cpu::IsaChoice& choice = cpu::preferred_isa();
  std::ostringstream out;
  out << "l1d_bytes=" << caches.l1d << ";l2_bytes=" << caches.l2 << ";l3_bytes=" << caches.l3
      << ";cache_source=" << caches.source << ";isa_cap=" << (cpu::isa_capped() ? cpu::isa_name(cpu::isa_cap()) : "none")
      << ";preferred_isa=" << cpu::isa_name(choice.isa) << ";preferred_reason=" << choice.reason
      << ";calibration_avx512_gflops=" << choice.avx512_gflops << ";calibration_avx2_gflops=" << choice.avx2_gflops;
  for (cpu::Isa isa : cpu::kAllIsas) {
    const auto* uk = isa == cpu::Isa::Avx512 ? cpu::avx512_kernel_f32()
        : isa == cpu::Isa::Avx2              ? cpu::avx2_kernel_f32()
                                             : cpu::generic_kernel_f32();
    if (uk == nullptr) continue;
    const cpu::Blocking b = cpu::blocking_for(uk->mr, uk->nr, sizeof(float));
    out << ";blocking_" << uk->isa << "=" << uk->mr << "," << uk->nr << "," << b.kc << "," << b.mc << "," << b.nc;
  }
  return out.str();
}

// An instruction-set name from Python, checked: known, and usable here.
cpu::Isa usable_isa(const char* op, c10::string_view isa) {
  for (cpu::Isa candidate : cpu::kAllIsas) {
    if (isa == cpu::isa_name(candidate)) {
      TORCH_CHECK_VALUE(
          cpu::usable(candidate), op, ": this CPU cannot run ", isa, " code",
          cpu::hardware_has(candidate) ? " (MYLINEAROPS_ISA excludes it)" : "",
          "; instruction sets available here: ", cpu_microkernels());
      return candidate;
    }
  }
  TORCH_CHECK_VALUE(false, op, ": unknown instruction set '", isa, "'; choose one of avx512, avx2, generic");
  return cpu::Isa::Generic; // unreachable
}

double cpu_fma_peak(c10::string_view isa, int64_t threads, double seconds) {
  const char* op = "mylinearops.cpu_fma_peak";
  const cpu::Isa checked = usable_isa(op, isa);
  TORCH_CHECK_VALUE(threads >= 1, op, ": threads must be at least 1, got ", threads);
  TORCH_CHECK_VALUE(seconds > 0 && seconds <= 10, op, ": seconds must be in (0, 10], got ", seconds);
  return cpu::fma_peak_gflops(checked, static_cast<int>(threads), seconds);
}

int64_t cpu_fma_loop(c10::string_view isa, int64_t threads, int64_t iterations) {
  const char* op = "mylinearops.cpu_fma_loop";
  const cpu::Isa checked = usable_isa(op, isa);
  TORCH_CHECK_VALUE(threads >= 1, op, ": threads must be at least 1, got ", threads);
  TORCH_CHECK_VALUE(iterations >= 1, op, ": iterations must be at least 1, got ", iterations);
  return cpu::run_fma_loop(checked, static_cast<int>(threads), iterations);
}

double cpu_clock_ghz(double seconds) {
  TORCH_CHECK_VALUE(
      seconds > 0 && seconds <= 10, "mylinearops.cpu_clock_ghz: seconds must be in (0, 10], got ", seconds);
  return cpu::measured_clock_ghz(seconds);
}

} // namespace

// [book:schemas]
TORCH_LIBRARY(mylinearops, m) {
  m.def("matmul(Tensor A, Tensor B, str algo=\"auto\") -> Tensor");
  m.def("linearop(Tensor X, Tensor W, Tensor? b=None, str algo=\"auto\") -> Tensor");
  m.def("build_info() -> str", &build_info);
  m.def("cpu_info() -> str", &cpu_info);
  m.def("cpu_fma_peak(str isa, int threads, float seconds=0.05) -> float", &cpu_fma_peak);
  m.def("cpu_last_gemm_plan() -> str", &cpu_last_gemm_plan);
  m.def("cpu_clock_ghz(float seconds=0.02) -> float", &cpu_clock_ghz);
  m.def("cpu_fma_loop(str isa, int threads, int iterations) -> int", &cpu_fma_loop);
}

TORCH_LIBRARY_IMPL(mylinearops, CPU, m) {
  m.impl("matmul", &matmul);
  m.impl("linearop", &linearop);
}

// Registered in every build: without CUDA kernels linear_forward raises a
// clear error instead of the dispatcher's "could not run ... CUDA backend".
TORCH_LIBRARY_IMPL(mylinearops, CUDA, m) {
  m.impl("matmul", &matmul);
  m.impl("linearop", &linearop);
}
// [/book:schemas]

} // namespace mylinearops
