"""Checkers for the exercises of chapters/alexnet.ipynb."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from booktools.checkers import expect_bool, fail, passed


def _leaves(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if not list(m.children())]


def _describe(layer: nn.Module) -> str:
    return repr(layer).replace("\n", " ")


def _alexnet_with_batchnorm() -> nn.Module:
    from booktools.generated.alexnet import AlexNet

    model = AlexNet()
    layers = []
    for layer in model.features:
        layers.append(layer)
        if isinstance(layer, nn.Conv2d):
            layers.append(nn.BatchNorm2d(layer.out_channels))
    model.features = nn.Sequential(*layers)
    return model


def check_alexnet_batchnorm(model: nn.Module) -> None:
    """`model` must be the chapter's AlexNet with an `nn.BatchNorm2d(C)` directly after each of
    its five convolutions (C = that convolution's output channels), everything else unchanged.

    Compares the layers in order with a reference, then loads the reference's weights and
    (random) running statistics into the reader's layers and compares the outputs in eval mode,
    which catches a batch norm placed after the ReLU instead of before it."""
    exercise = "alexnet, batch norm"
    reference = _alexnet_with_batchnorm()
    ours, theirs = _leaves(reference), _leaves(model)
    for i, (want, got) in enumerate(itertools.zip_longest(ours, theirs)):
        if got is None:
            fail(exercise, f"the model ends after {len(theirs)} layers; layer {i} should be {_describe(want)}")
        if want is None:
            fail(exercise, f"layer {i}, {_describe(got)}, is one too many: the reference has {len(ours)} layers")
        if _describe(got) != _describe(want):
            before = f" (after {_describe(theirs[i - 1])})" if i else ""
            fail(exercise, f"layer {i}{before} is {_describe(got)}, expected {_describe(want)}")
    n_ref, n_got = (sum(p.numel() for p in m.parameters()) for m in (reference, model))
    if n_got != n_ref:
        fail(exercise, f"{n_got:,} parameters, expected {n_ref:,}")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for layer in ours:
            if isinstance(layer, nn.BatchNorm2d):  # non-trivial statistics, so placement matters
                layer.running_mean.normal_(0, 0.5, generator=generator)
                layer.running_var.uniform_(0.5, 2.0, generator=generator)
                layer.weight.uniform_(0.5, 1.5, generator=generator)
                layer.bias.normal_(0, 0.5, generator=generator)
        for want, got in zip(ours, theirs):
            got.load_state_dict(want.state_dict())
        images = torch.randn(2, 3, 224, 224, generator=generator)
        was_training = model.training
        expected = reference.eval()(images)
        result = model.eval()(images)
        model.train(was_training)
    if result.shape != expected.shape:
        fail(exercise, f"output shape {tuple(result.shape)}, expected {tuple(expected.shape)}")
    if not torch.allclose(result, expected, rtol=1e-4, atol=1e-5):
        fail(exercise, "same layers, but with the same weights and running statistics the output "
                       "differs from the reference's: check the order of the calls in forward")
    passed(exercise, f"{len(ours)} layers in the right order, {n_got:,} parameters, same outputs in eval mode")


def check_mkldnn_rule(uses_mkldnn) -> None:
    """`uses_mkldnn(batch, channels, height, width, kernel, groups) -> bool` must predict whether
    `aten::_convolution` sends a float32 CPU convolution (stride 1, "same" padding, 64 output
    channels) to oneDNN, as `torch._C._select_conv_backend` reports, on a grid of cases.

    Kernels of 1x1 are left out: for them the choice also depends on the thread count."""
    exercise = "alexnet, mkldnn rule"
    cases = 0
    for batch, channels, size, kernel, groups in itertools.product(
            (1, 2, 3), (3, 16, 64, 192), (5, 10, 11, 13, 27, 83, 84), (3, 5, 11), (1, 2)):
        if channels % groups:
            continue
        x = torch.empty(batch, channels, size, size)
        w = torch.empty(64, channels // groups, kernel, kernel)
        chosen = torch._C._select_conv_backend(x, w, None, [1, 1], [kernel // 2] * 2, [1, 1],
                                               False, [0, 0], groups, None).name
        expected = chosen == "Mkldnn"
        got = uses_mkldnn(batch, channels, size, size, kernel, groups)
        cases += 1
        call = (f"uses_mkldnn(batch={batch}, channels={channels}, height={size}, width={size}, "
                f"kernel={kernel}, groups={groups})")
        expect_bool(exercise, call, got, expected, f"PyTorch chooses {chosen}")
    passed(exercise, f"agrees with _select_conv_backend on {cases} convolutions")


# The operators whose PrivateUse1 kernels a full toy backend needs for AlexNet in eval mode.
_ALEXNET_OPS = ["aten::convolution", "aten::relu_", "aten::max_pool2d_with_indices.out",
                "aten::_adaptive_avg_pool2d", "aten::view", "aten::as_strided", "aten::addmm.out",
                "aten::max_pool2d_with_indices", "aten::addmm"]


def _privateuse1_kernels() -> set[str]:
    return {op for op in _ALEXNET_OPS if torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")}


def check_toy_backend(toy_backend) -> None:
    """`toy_backend(log)` must be a context manager under which the chapter's AlexNet (eval mode,
    no_grad) runs entirely on PrivateUse1 kernels: the output equals the CPU's, something is
    logged, and on exit every kernel it registered is unregistered again."""
    import re

    from booktools.generated.alexnet import AlexNet

    exercise = "alexnet, toy backend"
    torch.manual_seed(0)
    model = AlexNet().eval()
    image = torch.randn(1, 3, 224, 224)
    before = _privateuse1_kernels()
    log = []
    with torch.no_grad():
        reference = model(image)
        try:
            with toy_backend(log):
                result = model(image)
        except NotImplementedError as error:
            match = re.search(r"Could not run '([\w:.]+)'", str(error))
            missing = match.group(1) if match else str(error).split(".")[0]
            fail(exercise, f"AlexNet still stops at {missing}: register a PrivateUse1 kernel for it")
    left = _privateuse1_kernels() - before
    if left:
        fail(exercise, f"after the block, PrivateUse1 kernels are still registered for {sorted(left)}: "
                       "unregister them on exit (library._destroy() in a finally clause)")
    if not log:
        fail(exercise, "AlexNet ran, but nothing was logged: did the calls reach your PrivateUse1 "
                       "kernels? (the key must be included inside the block)")
    if not torch.equal(result, reference):
        fail(exercise, "AlexNet ran on the toy backend, but its output differs from the CPU's")
    passed(exercise, f"the whole AlexNet ran on PrivateUse1 kernels, {len(log)} calls logged, "
                     "with the CPU's output, and nothing stayed registered")


def check_separable(make_separable) -> None:
    """`make_separable(conv)` must return a module that replaces the `nn.Conv2d` `conv` by a
    depthwise convolution (same kernel, stride, padding and dilation, groups = in_channels)
    followed by a 1x1 pointwise convolution to conv.out_channels, with the same output shape.
    Tried on AlexNet's convolutions 2, 4 and 5 and on a strided one without bias."""
    exercise = "alexnet, depthwise separable"
    convs = [(nn.Conv2d(64, 192, 5, padding=2), (1, 64, 27, 27)),
             (nn.Conv2d(384, 256, 3, padding=1), (1, 384, 13, 13)),
             (nn.Conv2d(256, 256, 3, padding=1), (1, 256, 13, 13)),
             (nn.Conv2d(8, 12, 3, stride=2, padding=1, bias=False), (2, 8, 9, 9))]
    for conv, shape in convs:
        name = _describe(conv)
        replacement = make_separable(conv)
        layers = [m for m in replacement.modules() if isinstance(m, nn.Conv2d)]
        if len(layers) != 2:
            fail(exercise, f"for {name}: {len(layers)} convolutions, expected 2 (depthwise, then pointwise)")
        depthwise, pointwise = layers
        c_in = conv.in_channels
        wanted = dict(in_channels=c_in, out_channels=c_in, groups=c_in, kernel_size=conv.kernel_size,
                      stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
        for attr, value in wanted.items():
            if getattr(depthwise, attr) != value:
                fail(exercise, f"for {name}: the first (depthwise) convolution has {attr}="
                               f"{getattr(depthwise, attr)}, expected {value}")
        wanted = dict(in_channels=c_in, out_channels=conv.out_channels, kernel_size=(1, 1),
                      stride=(1, 1), groups=1)
        for attr, value in wanted.items():
            if getattr(pointwise, attr) != value:
                fail(exercise, f"for {name}: the second (pointwise) convolution has {attr}="
                               f"{getattr(pointwise, attr)}, expected {value}")
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            got, want = replacement(x), conv(x)
            if got.shape != want.shape:
                fail(exercise, f"for {name}: output shape {tuple(got.shape)}, expected {tuple(want.shape)}")
            composed = pointwise(depthwise(x))
            if not torch.allclose(got, composed, rtol=1e-4, atol=1e-5):
                fail(exercise, f"for {name}: the module's output is not pointwise(depthwise(x))")
    passed(exercise, f"depthwise then pointwise, same output shapes, on {len(convs)} convolutions")
