// The operators' autograd formulas, registered in C++ under the Autograd
// dispatch key. For C = A @ B:
//   dA = dC @ B^T    dB = A^T @ dC    (db = dC summed over rows)
// B.mT() / A.mT() are views: the kernels read any strides, so no transposed
// copy is made. Only the gradients autograd asks for are computed, and only
// the tensors those need are saved.
//
// Why C++ and not torch.library.register_autograd in Python: a Python
// autograd kernel runs Python on every call, even when no input requires a
// gradient: several microseconds per call, a real share of the MLP's small
// batch-128 products (the chapter "When to write your own operator" measures
// it against the products and the training step).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS // only the headers used (mylinearops.cpp says why)
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/FuncTorchTLS.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <optional>
#include <string>

namespace mylinearops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The operators themselves, called through the dispatcher: in the forward
// below autograd (to the CPU/CUDA kernel, or the fake one under
// torch.compile), in the backward with autograd (so the backward is itself
// differentiable: gradgradcheck).
at::Tensor call_matmul(const at::Tensor& A, const at::Tensor& B, c10::string_view algo) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mylinearops::matmul", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
  return op.call(A, B, algo);
}

at::Tensor call_linearop(
    const at::Tensor& X, const at::Tensor& W, const std::optional<at::Tensor>& b, c10::string_view algo) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mylinearops::linearop", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, c10::string_view)>();
  return op.call(X, W, b, algo);
}

// [book:autograd]
class MatmulFunction : public torch::autograd::Function<MatmulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& A, const at::Tensor& B, c10::string_view algo) {
    const bool need_dA = A.requires_grad(), need_dB = B.requires_grad();
    ctx->save_for_backward({need_dB ? A : at::Tensor(), need_dA ? B : at::Tensor()});
    ctx->saved_data["algo"] = std::string(algo);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_matmul(A, B, algo);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &A = saved[0], &B = saved[1], &dC = grads[0];
    const std::string algo = ctx->saved_data["algo"].toStringRef();
    at::Tensor dA, dB;
    if (ctx->needs_input_grad(0)) dA = call_matmul(dC, B.mT(), algo);
    if (ctx->needs_input_grad(1)) dB = call_matmul(A.mT(), dC, algo);
    return {dA, dB, at::Tensor()};
  }
};

class LinearopFunction : public torch::autograd::Function<LinearopFunction> {
 public:
  static at::Tensor forward(
      AutogradContext* ctx, const at::Tensor& X, const at::Tensor& W, const std::optional<at::Tensor>& b,
      c10::string_view algo) {
    const bool need_dX = X.requires_grad(), need_dW = W.requires_grad();
    ctx->save_for_backward({need_dW ? X : at::Tensor(), need_dX ? W : at::Tensor()});
    ctx->saved_data["algo"] = std::string(algo);
    ctx->saved_data["has_bias"] = b.has_value(); // without b there is no third input edge
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_linearop(X, W, b, algo);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &X = saved[0], &W = saved[1], &dY = grads[0];
    const std::string algo = ctx->saved_data["algo"].toStringRef();
    at::Tensor dX, dW, db;
    if (ctx->needs_input_grad(0)) dX = call_matmul(dY, W.mT(), algo);
    if (ctx->needs_input_grad(1)) dW = call_matmul(X.mT(), dY, algo);
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) db = dY.sum(0);
    return {dX, dW, db, at::Tensor()};
  }
};
// [/book:autograd]

// Function::apply builds a graph node on every call, and only then finds out
// whether autograd wants it. ATen's own autograd kernels ask first
// (compute_requires_grad), and so do these: with grad mode off (the backward
// pass, torch.no_grad) or no input requiring a gradient, the call goes
// straight below autograd. Forward-mode tangents and torch.func transforms
// still reach apply, which refuses them with an error instead of dropping them.
template <typename... Inputs>
bool autograd_may_act(const Inputs&... inputs) {
  return torch::autograd::compute_requires_grad(inputs...) || (torch::autograd::isFwGradDefined(inputs) || ...) ||
      at::functorch::functorchTLSAccessor() != nullptr;
}

at::Tensor matmul_autograd(const at::Tensor& A, const at::Tensor& B, c10::string_view algo) {
  if (autograd_may_act(A, B)) return MatmulFunction::apply(A, B, algo);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return call_matmul(A, B, algo);
}

at::Tensor linearop_autograd(
    const at::Tensor& X, const at::Tensor& W, const std::optional<at::Tensor>& b, c10::string_view algo) {
  if (autograd_may_act(X, W, b)) return LinearopFunction::apply(X, W, b, algo);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return call_linearop(X, W, b, algo);
}

} // namespace

TORCH_LIBRARY_IMPL(mylinearops, Autograd, m) {
  m.impl("matmul", &matmul_autograd);
  m.impl("linearop", &linearop_autograd);
}

} // namespace mylinearops
