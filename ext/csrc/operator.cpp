// The operator layer shared by the regular and the stable-ABI build (see
// operator.h). Only the C++ standard library, the kernels and runtime.h.
#include "operator.h"

#include <array>
#include <sstream>
#include <string>
#include <string_view>

#include "cpu/cpu_features.h"
#include "cpu/tuning.h"
#include "cpu/microkernel.h"
#include "runtime.h"

namespace mylinearops {
namespace {

struct AlgoName {
  std::string_view name;
  DeviceKind device;
  Algo algo;
};

// [book:algo-table]
// The `algo=` names. "auto" picks the fastest kernel for the device.
constexpr std::array<AlgoName, 12> kAlgos{{
    {"auto", DeviceKind::Cpu, Algo::CpuPacked},
    {"reference", DeviceKind::Cpu, Algo::CpuReference},
    {"blocked", DeviceKind::Cpu, Algo::CpuBlocked},
    {"packed", DeviceKind::Cpu, Algo::CpuPacked},
    {"packed_avx512", DeviceKind::Cpu, Algo::CpuPackedAvx512},
    {"packed_avx2", DeviceKind::Cpu, Algo::CpuPackedAvx2},
    {"packed_generic", DeviceKind::Cpu, Algo::CpuPackedGeneric},
    {"auto", DeviceKind::Cuda, Algo::CudaRegisterBlocked},
    {"naive", DeviceKind::Cuda, Algo::CudaNaive},
    {"coalesced", DeviceKind::Cuda, Algo::CudaCoalesced},
    {"tiled", DeviceKind::Cuda, Algo::CudaTiled},
    {"register_blocked", DeviceKind::Cuda, Algo::CudaRegisterBlocked},
}};
// [/book:algo-table]

std::string algo_names(DeviceKind device) {
  std::string out;
  for (const auto& a : kAlgos) {
    if (a.device != device) continue;
    if (!out.empty()) out += ",";
    out += a.name;
  }
  return out;
}

const char* device_kind_name(DeviceKind device) {
  switch (device) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    default: return "other";
  }
}

// "[2, 3]", as PyTorch prints a shape.
std::string shape(const Operand& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(t.sizes[i]);
  }
  return out + "]";
}

bool is_float(const Operand& t) {
  return t.dtype != Dtype::Unsupported;
}

} // namespace

Algo parse_algo(const OpNames& names, std::string_view algo, DeviceKind device) {
  const AlgoName* other_device = nullptr;
  for (const auto& a : kAlgos) {
    if (a.name != algo) continue;
    if (a.device == device) {
      MYLINEAROPS_CHECK_VALUE(
          a.device != DeviceKind::Cpu || cpu_supports(a.algo),
          names.op, ": algo '", algo, "' needs a CPU instruction set this CPU (or build) lacks",
          cpu::isa_capped() ? std::string(" or MYLINEAROPS_ISA=") + cpu::isa_name(cpu::isa_cap()) + " excludes" : "",
          "; micro-kernels available here: ", cpu_microkernels());
      return a.algo;
    }
    other_device = &a;
  }
  const char* device_name = device_kind_name(device);
  MYLINEAROPS_CHECK_VALUE(
      other_device == nullptr,
      names.op, ": algo '", algo, "' is a ", device_kind_name(other_device ? other_device->device : device),
      " kernel, but the inputs are on ", device_name, "; ", device_name, " algos are: ", algo_names(device));
  MYLINEAROPS_CHECK_VALUE(
      false, names.op, ": unknown algo '", algo, "' for ", device_name,
      " tensors; choose one of: ", algo_names(device));
  return Algo::CpuReference; // unreachable
}

// [book:input-checks]
// One place for every input check, shared by the CPU and CUDA kernels and by
// both builds. ops.py mirrors these messages in the fake (meta)
// implementation, and tests/test_errors.py checks that both say the same.
void check_inputs(const OpNames& names, const Operand& A, const Operand& B, const Operand* bias) {
  MYLINEAROPS_CHECK(
      A.dim() == 2, names.op, ": ", names.a, " must be a 2-D matrix, but got a ",
      A.dim(), "-D tensor of shape ", shape(A));
  MYLINEAROPS_CHECK(
      B.dim() == 2, names.op, ": ", names.b, " must be a 2-D matrix, but got a ",
      B.dim(), "-D tensor of shape ", shape(B));
  auto check_dtype = [&](const char* name, const Operand& t) {
    MYLINEAROPS_CHECK_TYPE(
        is_float(t), names.op, ": unsupported dtype ", t.dtype_name, " for ", name,
        " (shape ", shape(t), "); supported dtypes are float32 and float64");
  };
  check_dtype(names.a, A);
  check_dtype(names.b, B);
  MYLINEAROPS_CHECK_TYPE(
      A.dtype == B.dtype, names.op, ": ", names.a, " and ", names.b,
      " must have the same dtype, but ", names.a, " is ", A.dtype_name, " ", shape(A),
      " and ", names.b, " is ", B.dtype_name, " ", shape(B));
  MYLINEAROPS_CHECK(
      A.device_name == B.device_name, names.op, ": ", names.a, " and ", names.b,
      " must be on the same device, but ", names.a, " is on ", A.device_name, " and ",
      names.b, " is on ", B.device_name);
  MYLINEAROPS_CHECK(
      A.size(1) == B.size(0), names.op, ": inner dimensions differ: ", names.a, " is ",
      shape(A), " but ", names.b, " is ", shape(B));
  if (bias != nullptr) {
    const Operand& b = *bias;
    check_dtype(names.bias, b);
    MYLINEAROPS_CHECK_TYPE(
        b.dtype == A.dtype, names.op, ": ", names.bias, " must have the same dtype as ",
        names.a, " and ", names.b, " (", A.dtype_name, "), but ", names.bias, " is ",
        b.dtype_name);
    MYLINEAROPS_CHECK(
        b.device_name == A.device_name, names.op, ": ", names.bias,
        " must be on the same device as ", names.a, " and ", names.b, " (", A.device_name,
        "), but ", names.bias, " is on ", b.device_name);
    MYLINEAROPS_CHECK(
        b.dim() == 1 && b.size(0) == B.size(1), names.op, ": ", names.bias,
        " must be a 1-D tensor of size ", B.size(1), " (", names.b, " is ", shape(B),
        "), but got shape ", shape(b));
  }
#ifndef MYLINEAROPS_WITH_CUDA
  MYLINEAROPS_CHECK(
      A.device != DeviceKind::Cuda, names.op, ": this build of mylinearops has no CUDA kernels, ",
      "so it cannot run on ", A.device_name, " tensors; rebuild it where nvcc is available ",
      "(MYLINEAROPS_CUDA=1)");
#endif
}
// [/book:input-checks]

namespace {

template <typename T>
GemmArgs<T> gemm_args(const Operand& A, const Operand& B, const Operand* bias, void* C) {
  GemmArgs<T> g{};
  g.m = A.sizes[0];
  g.k = A.sizes[1];
  g.n = B.sizes[1];
  g.a = static_cast<const T*>(A.data);
  g.a_stride0 = A.strides[0];
  g.a_stride1 = A.strides[1];
  g.b = static_cast<const T*>(B.data);
  g.b_stride0 = B.strides[0];
  g.b_stride1 = B.strides[1];
  g.bias = bias ? static_cast<const T*>(bias->data) : nullptr;
  g.bias_stride = bias ? bias->strides[0] : 0;
  g.c = static_cast<T*>(C);
  return g;
}

template <typename T>
void run_typed(Algo algo, const GemmArgs<T>& args, const Operand& A) {
#ifdef MYLINEAROPS_WITH_CUDA
  if (A.device == DeviceKind::Cuda) {
    cuda_gemm<T>(algo, args, A.device_index);
    return;
  }
#endif
  cpu_gemm<T>(algo, args);
}

} // namespace

void run_gemm(Algo algo, const Operand& A, const Operand& B, const Operand* bias, void* C) {
  // A sum over nothing is 0 (+ bias): only the plain kernels are written for
  // k = 0, and it costs nothing to use them.
  if (A.sizes[1] == 0) algo = A.device == DeviceKind::Cuda ? Algo::CudaNaive : Algo::CpuReference;
  if (A.dtype == Dtype::Float32) {
    run_typed<float>(algo, gemm_args<float>(A, B, bias, C), A);
  } else {
    run_typed<double>(algo, gemm_args<double>(A, B, bias, C), A);
  }
}

// Facts about this build that Python reads once at import: which ABI, whether
// CUDA kernels were compiled, the algo names per device, the CPU
// micro-kernels, the compiler, and whether OpenMP was on.
std::string build_info(const std::string& abi) {
  std::ostringstream out;
  out << "abi=" << abi;
#ifdef MYLINEAROPS_WITH_CUDA
  out << ";with_cuda=1";
#else
  out << ";with_cuda=0";
#endif
  out << ";cpu_algos=" << algo_names(DeviceKind::Cpu) << ";cuda_algos=" << algo_names(DeviceKind::Cuda)
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
#ifdef MYLINEAROPS_AVX512_VIA_SIMDE
  out << ";avx512_emulated=1"; // a test build: cpu/microkernel_avx512.cpp
#else
  out << ";avx512_emulated=0";
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
  out << "l1d_bytes=" << caches.l1d << ";l1d_set_span_bytes=" << caches.l1d_set_span << ";l2_bytes=" << caches.l2
      << ";l3_bytes=" << caches.l3
      << ";cache_source=" << caches.source << ";isa_cap=" << (cpu::isa_capped() ? cpu::isa_name(cpu::isa_cap()) : "none")
      << ";preferred_isa=" << cpu::isa_name(choice.isa) << ";preferred_reason=" << choice.reason
      << ";calibration_avx512_gflops=" << choice.avx512_gflops << ";calibration_avx2_gflops=" << choice.avx2_gflops
      << ";pack_mode=" << cpu::pack_mode_name(cpu::pack_mode());
  for (cpu::Isa isa : cpu::kAllIsas) {
    const auto* uk = isa == cpu::Isa::Avx512 ? cpu::avx512_kernel_f32()
        : isa == cpu::Isa::Avx2              ? cpu::avx2_kernel_f32()
                                             : cpu::generic_kernel_f32();
    if (uk == nullptr) continue;
    const cpu::Blocking b = cpu::blocking_for(uk->mr, uk->nr, sizeof(float));
    out << ";blocking_" << uk->isa << "=" << uk->mr << "," << uk->nr << "," << b.kc << "," << b.mc << "," << b.nc;
  }
  // What the tuning search picked for float products on the threads a product
  // here would run on (searched per thread count), and what it timed:
  // candidates as "tile/kc/mc/nc/median seconds/same result/wins/noise chance/row block"
  // joined by ",", the chance being the sign test's for its wins.
  const cpu::Tuning& tuning = cpu::float_tuning(runtime::team_size());
  out << ";tuning_threads=" << tuning.threads << ";tuning_isa=" << tuning.kernel->isa
      << ";tuning_tile=" << tuning.kernel->mr << "x" << tuning.kernel->nr
      << ";tuning_kc=" << tuning.blocking.kc << ";tuning_mc=" << tuning.blocking.mc
      << ";tuning_nc=" << tuning.blocking.nc << ";tuning_reason=" << tuning.reason
      << ";tuning_seconds=" << tuning.seconds << ";tuning_rounds=" << tuning.rounds << ";tuning_candidates=";
  for (size_t i = 0; i < tuning.candidates.size(); ++i) {
    const cpu::TuningCandidate& c = tuning.candidates[i];
    out << (i ? "," : "") << c.kernel->mr << "x" << c.kernel->nr << "/" << c.blocking.kc << "/" << c.blocking.mc
        << "/" << c.blocking.nc << "/" << c.median_seconds << "/" << c.same_result << "/" << c.wins
        << "/" << cpu::sign_test_chance(c.wins, tuning.rounds) << "/" << c.row_block;
  }
  // The in-place rule: its rows per layout of A, and its trials as
  // "layout/rows/packed seconds/in-place seconds/wins/rounds/same result".
  out << ";tuning_in_place_rows=" << tuning.in_place.row_major << "," << tuning.in_place.column_major
      << ";tuning_in_place_reason=" << tuning.in_place_reason << ";tuning_in_place_trials=";
  for (size_t i = 0; i < tuning.in_place_trials.size(); ++i) {
    const cpu::InPlaceTrial& trial = tuning.in_place_trials[i];
    out << (i ? "," : "") << (trial.column_major ? "column_major" : "row_major") << "/" << trial.rows << "/"
        << trial.packed_seconds << "/" << trial.in_place_seconds << "/" << trial.wins << "/" << trial.rounds << "/"
        << trial.same_result;
  }
  // The sharing rule, and its trial as "shared seconds/own seconds/wins/rounds/same result".
  const cpu::ShareTrial& share = tuning.share_trial;
  out << ";tuning_share_b=" << tuning.share_b << ";tuning_share_reason=" << tuning.share_reason
      << ";tuning_share_trial=" << share.shared_seconds << "/" << share.own_seconds << "/" << share.wins << "/"
      << share.rounds << "/" << share.same_result;
  return out.str();
}

namespace {

// An instruction-set name from Python, checked: known, and usable here.
cpu::Isa usable_isa(const char* op, std::string_view isa) {
  for (cpu::Isa candidate : cpu::kAllIsas) {
    if (isa == cpu::isa_name(candidate)) {
      MYLINEAROPS_CHECK_VALUE(
          cpu::usable(candidate), op, ": this CPU cannot run ", isa, " code",
          cpu::hardware_has(candidate) ? " (MYLINEAROPS_ISA excludes it)" : "",
          "; instruction sets available here: ", cpu_microkernels());
      return candidate;
    }
  }
  MYLINEAROPS_CHECK_VALUE(false, op, ": unknown instruction set '", isa, "'; choose one of avx512, avx2, generic");
  return cpu::Isa::Generic; // unreachable
}

} // namespace

double cpu_fma_peak(std::string_view isa, int64_t threads, double seconds) {
  const char* op = "mylinearops.cpu_fma_peak";
  const cpu::Isa checked = usable_isa(op, isa);
  MYLINEAROPS_CHECK_VALUE(threads >= 1, op, ": threads must be at least 1, got ", threads);
  MYLINEAROPS_CHECK_VALUE(seconds > 0 && seconds <= 10, op, ": seconds must be in (0, 10], got ", seconds);
  return cpu::fma_peak_gflops(checked, static_cast<int>(threads), seconds);
}

double cpu_microkernel_gflops(std::string_view isa, double seconds) {
  const char* op = "mylinearops.cpu_microkernel_gflops";
  const cpu::Isa checked = usable_isa(op, isa);
  MYLINEAROPS_CHECK_VALUE(seconds > 0 && seconds <= 10, op, ": seconds must be in (0, 10], got ", seconds);
  return cpu::microkernel_gflops(checked, seconds);
}

int64_t cpu_fma_loop(std::string_view isa, int64_t threads, int64_t iterations) {
  const char* op = "mylinearops.cpu_fma_loop";
  const cpu::Isa checked = usable_isa(op, isa);
  MYLINEAROPS_CHECK_VALUE(threads >= 1, op, ": threads must be at least 1, got ", threads);
  MYLINEAROPS_CHECK_VALUE(iterations >= 1, op, ": iterations must be at least 1, got ", iterations);
  return cpu::run_fma_loop(checked, static_cast<int>(threads), iterations);
}

double cpu_clock_ghz(double seconds) {
  MYLINEAROPS_CHECK_VALUE(
      seconds > 0 && seconds <= 10, "mylinearops.cpu_clock_ghz: seconds must be in (0, 10], got ", seconds);
  return cpu::measured_clock_ghz(seconds);
}

int64_t cuda_fma_loop(const Operand& out, int64_t iterations, double a, double b) {
  const char* op = "mylinearops.cuda_fma_loop";
  MYLINEAROPS_CHECK(
      out.device == DeviceKind::Cuda, op, ": out must be a CUDA tensor, but it is on ", out.device_name);
  MYLINEAROPS_CHECK_TYPE(
      out.dtype == Dtype::Float32, op, ": out must be float32 (the loop measures FP32 throughput), but it is ",
      out.dtype_name);
  MYLINEAROPS_CHECK(
      out.dim() == 1 && (out.size(0) <= 1 || out.strides[0] == 1), op,
      ": out must be a contiguous 1-D tensor (one element per thread), but got shape ", shape(out));
  MYLINEAROPS_CHECK_VALUE(iterations >= 1, op, ": iterations must be at least 1, got ", iterations);
#ifdef MYLINEAROPS_WITH_CUDA
  if (out.size(0) == 0) return 0;
  return cuda::fma_loop(
      static_cast<float*>(const_cast<void*>(out.data)), out.size(0), iterations, static_cast<float>(a),
      static_cast<float>(b), out.device_index);
#else
  MYLINEAROPS_CHECK(
      false, op, ": this build of mylinearops has no CUDA kernels; rebuild it where nvcc is available ",
      "(MYLINEAROPS_CUDA=1)");
  return 0; // unreachable
#endif
}

} // namespace mylinearops
