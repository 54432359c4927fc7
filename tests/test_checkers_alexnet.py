"""The AlexNet chapter's checkers accept a right answer and reject wrong ones with a useful message."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from booktools.checkers import CheckFailed
from booktools.checkers import alexnet as checks
from booktools.generated.alexnet import AlexNet, toy_backend


# ------------------------------------------------------------------------------ batch norm
def with_batchnorm(after_relu=False, skip_last=False, features=None):
    model = AlexNet()
    layers = list(model.features)
    out, convs = [], [i for i, layer in enumerate(layers) if isinstance(layer, nn.Conv2d)]
    for i, layer in enumerate(layers):
        out.append(layer)
        if skip_last and i == convs[-1]:
            continue
        conv = layers[i - 1] if after_relu else layer
        if (after_relu and i - 1 in convs) or (not after_relu and i in convs):
            out.append(nn.BatchNorm2d(features or conv.out_channels))
    model.features = nn.Sequential(*out)
    return model


def test_batchnorm_checker_accepts_the_right_answer(capsys):
    checks.check_alexnet_batchnorm(with_batchnorm())
    assert "passed" in capsys.readouterr().out


def test_batchnorm_checker_accepts_another_layout_of_the_same_network(capsys):
    model = with_batchnorm()
    model.features = nn.Sequential(*[nn.Sequential(*model.features[:4]), *model.features[4:]])  # nested
    checks.check_alexnet_batchnorm(model)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda: with_batchnorm(after_relu=True), r"layer 1 \(after Conv2d.*\) is ReLU.*expected BatchNorm2d\(64"),
        (lambda: with_batchnorm(skip_last=True), "expected BatchNorm2d\\(256"),
        (lambda: AlexNet(), "expected BatchNorm2d"),
    ],
)
def test_batchnorm_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_alexnet_batchnorm(wrong())


def test_batchnorm_checker_rejects_a_forward_in_the_wrong_order():
    class SkipsTheAvgpool(nn.Module):
        def __init__(self):
            super().__init__()
            inner = with_batchnorm()
            self.features, self.avgpool, self.classifier = inner.features, inner.avgpool, inner.classifier

        def forward(self, x):  # pools before the features: same layers, different network
            x = self.features(nn.functional.interpolate(x, scale_factor=1.0))
            return self.classifier(torch.flatten(self.avgpool(x) * 0.5, 1))

    with pytest.raises(CheckFailed, match="output differs"):
        checks.check_alexnet_batchnorm(SkipsTheAvgpool())


# ---------------------------------------------------------------------------- mkldnn rule
def rule(batch, channels, height, width, kernel, groups):
    return batch > 1 or batch * channels * height * width > 20480 or kernel > 3 or groups > 1


def test_mkldnn_rule_checker_accepts_the_rule(capsys):
    checks.check_mkldnn_rule(rule)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda b, c, h, w, k, g: k > 3, "returned False, but PyTorch chooses Mkldnn"),
        (lambda b, c, h, w, k, g: b > 1 or b * c * h * w > 10000 or k > 3 or g > 1, "returned True, but PyTorch chooses Slow2d"),
        (lambda b, c, h, w, k, g: "Mkldnn", "not a bool"),
    ],
)
def test_mkldnn_rule_checker_rejects_wrong_rules(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_mkldnn_rule(wrong)


# ---------------------------------------------------------------------------- toy backend
@contextlib.contextmanager
def backend(log, ops=("convolution", "relu_", "max_pool2d_with_indices.out", "_adaptive_avg_pool2d",
                      "view", "as_strided", "addmm.out"), unregister=True, keep=None, wrong_relu=False):
    normal_keys = (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())

    def pass_through(name):
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")

        def kernel(*args, **kwargs):
            log.append(name)
            if wrong_relu and name == "relu_":
                return args[0]
            with torch._C._ForceDispatchKeyGuard(*normal_keys), torch._C._AutoDispatchBelowADInplaceOrView():
                return op(*args, **kwargs)
        return kernel

    library = torch.library.Library("aten", "IMPL")
    for name in ops:
        library.impl(name, pass_through(name), "PrivateUse1")
    try:
        with torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.PrivateUse1):
            yield
    finally:
        if unregister:
            library._destroy()
        else:
            keep.append(library)


def test_toy_backend_checker_accepts_a_full_backend(capsys):
    checks.check_toy_backend(backend)
    assert "passed" in capsys.readouterr().out


def test_toy_backend_checker_rejects_the_chapters_backend():
    with pytest.raises(CheckFailed, match=r"stops at aten::relu_: register a PrivateUse1 kernel"):
        checks.check_toy_backend(toy_backend)


def test_toy_backend_checker_rejects_a_wrong_kernel():
    with pytest.raises(CheckFailed, match="output differs from the CPU's"):
        checks.check_toy_backend(lambda log: backend(log, wrong_relu=True))


def test_toy_backend_checker_rejects_a_backend_that_does_nothing():
    with pytest.raises(CheckFailed, match="nothing was logged"):
        checks.check_toy_backend(lambda log: contextlib.nullcontext())


def test_toy_backend_checker_rejects_kernels_left_registered():
    kept = []
    try:
        with pytest.raises(CheckFailed, match=r"still registered for \['aten::_adaptive_avg_pool2d'"):
            checks.check_toy_backend(lambda log: backend(log, unregister=False, keep=kept))
    finally:
        for library in kept:
            library._destroy()
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::relu_", "PrivateUse1")


# ------------------------------------------------------------------------------ separable
def separable(conv):
    return nn.Sequential(
        nn.Conv2d(conv.in_channels, conv.in_channels, conv.kernel_size, conv.stride, conv.padding,
                  conv.dilation, groups=conv.in_channels),
        nn.Conv2d(conv.in_channels, conv.out_channels, 1))


def test_separable_checker_accepts_the_right_answer(capsys):
    checks.check_separable(separable)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda conv: nn.Sequential(nn.Conv2d(conv.in_channels, conv.in_channels, conv.kernel_size,
                                              padding=conv.padding, groups=conv.in_channels),
                                    nn.Conv2d(conv.in_channels, conv.out_channels, 1)),
         r"Conv2d\(8, 12.*stride=\(2, 2\).*first \(depthwise\) convolution has stride=\(1, 1\)"),
        (lambda conv: nn.Sequential(nn.Conv2d(conv.in_channels, conv.in_channels, conv.kernel_size,
                                              padding=conv.padding, groups=1),
                                    nn.Conv2d(conv.in_channels, conv.out_channels, 1)),
         "depthwise\\) convolution has groups=1, expected 64"),
        (lambda conv: nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                                conv.padding, groups=conv.in_channels if conv.out_channels % conv.in_channels == 0 else 1),
         "1 convolutions, expected 2"),
        (lambda conv: nn.Sequential(separable(conv), nn.ReLU()), "not pointwise\\(depthwise\\(x\\)\\)"),
    ],
)
def test_separable_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_separable(wrong)
