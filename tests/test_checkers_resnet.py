"""The ResNet chapter's checkers accept right answers and reject wrong ones with a useful message."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from booktools.checkers import CheckFailed
from booktools.checkers import resnet as checks
from booktools.generated import resnet as rn


class FunctionalBlock(nn.Module):
    """A right answer in another style: no ReLU module, out-of-place addition."""

    expansion = 1

    def __init__(self, in_channels, channels, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = downsample

    def branch(self, x):
        return self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))

    def shortcut(self, x):
        return x if self.downsample is None else self.downsample(x)

    def forward(self, x):
        return F.relu(self.branch(x) + self.shortcut(x))


class NoResidual(FunctionalBlock):
    def forward(self, x):
        return F.relu(self.branch(x))


class NoFinalRelu(FunctionalBlock):
    def forward(self, x):
        return self.branch(x) + self.shortcut(x)


class ReluBeforeAddition(FunctionalBlock):
    def forward(self, x):
        return F.relu(self.branch(x)) + self.shortcut(x)


class IgnoresDownsample(FunctionalBlock):
    def forward(self, x):
        return F.relu(self.branch(x) + x)


class StrideOnSecondConv(FunctionalBlock):
    def __init__(self, in_channels, channels, stride=1, downsample=None):
        super().__init__(in_channels, channels, 1, downsample)
        self.conv2.stride = (stride, stride)


class NotesNames(nn.Module):
    expansion = 1

    def __init__(self, in_channels, channels, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.batchnorm1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = downsample


class WithBiases(FunctionalBlock):
    def __init__(self, in_channels, channels, stride=1, downsample=None):
        super().__init__(in_channels, channels, stride, downsample)
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=True)


class NoExpansion(FunctionalBlock):
    expansion = None


class WrongSignature(FunctionalBlock):
    def __init__(self, in_channels, channels):
        super().__init__(in_channels, channels)


def test_basic_block_checker_accepts_right_answers(capsys):
    checks.check_basic_block(rn.ResidualBasicBlock)
    checks.check_basic_block(FunctionalBlock)
    assert capsys.readouterr().out.count("passed") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (NoResidual, r"stride=1\): wrong output"),
        (NoFinalRelu, r"wrong output .*negative values: is the ReLU after the addition missing"),
        (ReluBeforeAddition, "wrong output"),
        (IgnoresDownsample, r"stride=2, downsample=<1x1 conv \+ BatchNorm>\) on an input of shape \(2, 8, 9, 9\) raised RuntimeError"),
        (StrideOnSecondConv, r"stride=2, downsample=.*wrong output"),
        (NotesNames, "names differ from torchvision's: missing bn1.bias, bn1.num_batches_tracked.*unexpected batchnorm1"),
        (WithBiases, "unexpected conv1.bias"),
        (NoExpansion, "expansion is None; _make_layer needs 1"),
        (WrongSignature, "could not be built: TypeError"),
        (rn.ResidualBottleNeck, "expansion is 4; _make_layer needs 1"),
    ],
)
def test_basic_block_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_basic_block(wrong)


class PaperBottleNeck(rn.ResidualBottleNeck):
    def __init__(self, in_channels, channels, stride=1, downsample=None):
        super().__init__(in_channels, channels, 1, downsample)
        self.conv1.stride = (stride, stride)


class BottleneckNoMiddleRelu(rn.ResidualBottleNeck):
    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn3(self.conv3(self.bn2(self.conv2(out))))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


def test_bottleneck_checker(capsys):
    checks.check_bottleneck(rn.ResidualBottleNeck)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"BottleNeck\(16, 8, stride=2, downsample=.*wrong output"):
        checks.check_bottleneck(PaperBottleNeck)
    with pytest.raises(CheckFailed, match=r"stride=1\): wrong output"):
        checks.check_bottleneck(BottleneckNoMiddleRelu)
    with pytest.raises(CheckFailed, match="expansion is 1; _make_layer needs 4"):
        checks.check_bottleneck(rn.ResidualBasicBlock)


def notes_to_torchvision(state_dict):
    renamed = {}
    for key, tensor in state_dict.items():
        parts = key.split(".")
        if parts[0] == "conv1":
            if parts[1] == "0":
                continue
            parts = ["bn1"] + parts[2:]
        elif parts[0] in ("conv2", "conv3", "conv4", "conv5"):
            parts[0] = f"layer{int(parts[0][-1]) - 1}"
            parts[2] = parts[2].replace("batchnorm", "bn")
            if (parts[2].startswith("conv") or parts[2:4] == ["downsample", "0"]) and parts[-1] == "bias":
                continue
        renamed[".".join(parts)] = tensor
    return renamed


def test_notes_renaming_checker(capsys):
    checks.check_notes_to_torchvision(notes_to_torchvision)
    checks.check_notes_to_torchvision(lambda sd: {k: v.clone() for k, v in notes_to_torchvision(sd).items()})
    assert capsys.readouterr().out.count("passed") == 2


def keeps_biases(state_dict):
    out = notes_to_torchvision(state_dict)
    out["layer1.0.conv1.bias"] = state_dict["conv2.0.conv1.bias"]
    return out


def swaps_bn(state_dict):
    out = notes_to_torchvision(state_dict)
    out["layer1.0.bn1.weight"], out["layer1.0.bn2.weight"] = out["layer1.0.bn2.weight"], out["layer1.0.bn1.weight"]
    return out


def swaps_weight_and_bias(state_dict):
    out = notes_to_torchvision(state_dict)
    out["bn1.weight"], out["bn1.bias"] = out["bn1.bias"], out["bn1.weight"]
    return out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda sd: dict(sd), "got no tensor"),
        (lambda sd: {**notes_to_torchvision(sd), "conv1.weight": sd["conv1.0.weight"]}, "conv1.weight is kept"),
        (swaps_bn, "layer1.0.bn1.weight holds the notes' conv2.0.batchnorm2.weight, expected conv2.0.batchnorm1.weight"),
        (keeps_biases, "layer1.0.conv1.bias are not torchvision names"),
        (lambda sd: {k: v for k, v in notes_to_torchvision(sd).items() if "layer4" not in k}, "torchvision's layer4"),
        (swaps_weight_and_bias, "bn1.weight holds the notes' conv1.1.bias, expected conv1.1.weight"),
        (lambda sd: {k: torch.zeros_like(v) for k, v in notes_to_torchvision(sd).items()}, "the tensor under bn1.weight is none of the notes' tensors .expected the notes' conv1.1.weight."),
        (lambda sd: list(sd), "not a dict"),
    ],
)
def test_notes_renaming_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_notes_to_torchvision(wrong)


def fold_right(conv, bn):
    conv2 = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, bias=False)
    bn2 = copy.deepcopy(bn)
    with torch.no_grad():
        conv2.weight.copy_(conv.weight)
        bn2.running_mean -= conv.bias
    return conv2, bn2


def fold_wrong_sign(conv, bn):
    conv2, bn2 = fold_right(conv, bn)
    with torch.no_grad():
        bn2.running_mean += 2 * conv.bias
    return conv2, bn2


def fold_into_beta(conv, bn):
    conv2, bn2 = fold_right(conv, bn)
    with torch.no_grad():
        bn2.running_mean += conv.bias
        bn2.bias += conv.bias        # forgets the scaling by gamma / sqrt(var + eps)
    return conv2, bn2


def test_bias_folding_checker(capsys):
    checks.check_bias_folding(fold_right)
    assert "passed" in capsys.readouterr().out
    for wrong in (fold_wrong_sign, fold_into_beta):
        with pytest.raises(CheckFailed, match="outputs differ by up to"):
            checks.check_bias_folding(wrong)
    with pytest.raises(CheckFailed, match="still has a bias"):
        checks.check_bias_folding(lambda conv, bn: (conv, bn))
    with pytest.raises(CheckFailed, match="not a pair"):
        checks.check_bias_folding(lambda conv, bn: conv)
