// The few services the kernels need from PyTorch: error reporting, the
// intra-op thread pool, the current CUDA stream. Two implementations, one per
// build, so that cpu/ and cuda/ compile unchanged into both libraries:
//   regular build:    ATen and c10 (at::parallel_for, TORCH_CHECK, ...)
//   stable-ABI build: (-DMYLINEAROPS_STABLE_ABI) only the LibTorch stable ABI,
//                     whose C shim functions keep their signatures across
//                     torch releases.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#ifdef MYLINEAROPS_STABLE_ABI
#include <torch/csrc/stable/ops.h> // torch::stable::parallel_for, get_num_threads
#include <torch/headeronly/util/Exception.h>
#else
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>
#ifdef MYLINEAROPS_STABLE_ABI
#include <torch/csrc/inductor/aoti_torch/c/shim.h> // needs USE_CUDA (set by the build)
#include <torch/csrc/stable/macros.h>              // STD_CUDA_KERNEL_LAUNCH_CHECK
#include <torch/headeronly/util/shim_utils.h>       // STABLE_TORCH_ERROR_CODE_CHECK
#ifndef STABLE_TORCH_ERROR_CODE_CHECK
// Building against torch 2.10 or 2.11, whose headers lack this macro (seen with 2.11): the same check.
#define STABLE_TORCH_ERROR_CODE_CHECK(call)                                                   \
  do {                                                                                        \
    if ((call) != AOTI_TORCH_SUCCESS) throw std::runtime_error(#call " returned an error"); \
  } while (0)
#endif
#else
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#endif
#endif

namespace mylinearops::runtime {

// All arguments streamed into one message, as c10::str does.
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  ((out << args), ...);
  return out.str();
}

#ifdef MYLINEAROPS_STABLE_ABI
// Only std::exception crosses the stable ABI: every failure reaches Python
// as a RuntimeError, whatever kind of error it is.
enum class ErrorKind { Runtime, Value, Type };
[[noreturn]] inline void fail(ErrorKind, const std::string& message) {
  throw std::runtime_error(message);
}

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& body) {
  torch::stable::parallel_for(begin, end, grain, body);
}
inline int num_threads() {
  return static_cast<int>(torch::stable::get_num_threads());
}
// The stable ABI has no in_parallel_region(); PyTorch's parallel backend in
// its CPU wheels is OpenMP, whose own query sees its regions.
inline bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel() != 0;
#else
  return false;
#endif
}
#else
enum class ErrorKind { Runtime, Value, Type };
// The regular build raises the matching Python exception (c10::ValueError ->
// ValueError, c10::TypeError -> TypeError).
[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::Value: TORCH_CHECK_VALUE(false, message); break;
    case ErrorKind::Type: TORCH_CHECK_TYPE(false, message); break;
    default: TORCH_CHECK(false, message);
  }
  throw std::logic_error("unreachable");
}

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& body) {
  at::parallel_for(begin, end, grain, body);
}
inline int num_threads() {
  return at::get_num_threads();
}
inline bool in_parallel_region() {
  return at::in_parallel_region();
}
#endif

// The threads a product started here runs on: the intra-op pool, or one
// inside a parallel region (no nested teams).
inline int team_size() {
  return in_parallel_region() ? 1 : num_threads();
}

#ifdef __CUDACC__
// The stream PyTorch is using on this device, so our kernels are ordered
// with the work around them.
inline cudaStream_t current_cuda_stream(int device_index) {
#ifdef MYLINEAROPS_STABLE_ABI
  void* stream = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream));
  return static_cast<cudaStream_t>(stream);
#else
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index)).stream();
#endif
}
#endif

} // namespace mylinearops::runtime

#ifdef __CUDACC__
#ifdef MYLINEAROPS_STABLE_ABI
#define MYLINEAROPS_KERNEL_LAUNCH_CHECK() STD_CUDA_KERNEL_LAUNCH_CHECK()
#else
#define MYLINEAROPS_KERNEL_LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()
#endif
#endif

// check(cond, message parts...): raise with the parts streamed together.
#define MYLINEAROPS_CHECK_KIND(kind, cond, ...)                                               \
  do {                                                                                          \
    if (!(cond)) ::mylinearops::runtime::fail(kind, ::mylinearops::runtime::str(__VA_ARGS__)); \
  } while (0)
#define MYLINEAROPS_CHECK(cond, ...) \
  MYLINEAROPS_CHECK_KIND(::mylinearops::runtime::ErrorKind::Runtime, cond, __VA_ARGS__)
#define MYLINEAROPS_CHECK_VALUE(cond, ...) \
  MYLINEAROPS_CHECK_KIND(::mylinearops::runtime::ErrorKind::Value, cond, __VA_ARGS__)
#define MYLINEAROPS_CHECK_TYPE(cond, ...) \
  MYLINEAROPS_CHECK_KIND(::mylinearops::runtime::ErrorKind::Type, cond, __VA_ARGS__)
