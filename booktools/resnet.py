"""ResNet from scratch, built to match `torchvision.models.resnet18 ... resnet152` exactly.

Same modules, same attribute names (so a torchvision `state_dict` loads with strict=True),
same construction order (so the same seed gives the same initial weights), and the same
operations in the same order in `forward` (so outputs are bitwise equal).
The constructors keep the names of the notes this chapter grew from: `my_resnet18` ...
`my_resnet152`.
"""

from __future__ import annotations

import math

import torch
from torch import nn


# [book:output-size]
def conv_output_size(size: int, kernel: int, stride: int = 1, padding: int = 0,
                     dilation: int = 1) -> int:
    """Output length of a convolution or pooling window along one dimension.

    floor((size + 2*padding - dilation*(kernel - 1) - 1) / stride) + 1, as in the
    documentation of nn.Conv2d and nn.MaxPool2d (with ceil_mode=False).
    """
    return math.floor((size + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1
# [/book:output-size]


# [book:basic-block]
class ResidualBasicBlock(nn.Module):
    """Two 3x3 convolutions plus a shortcut: the block of ResNet-18 and ResNet-34."""

    expansion: int = 1  # output channels = channels * expansion

    def __init__(self, in_channels: int, channels: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        # bias=False: each convolution feeds a BatchNorm, which subtracts the mean anyway.
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)  # holds no state, so one module serves every call
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = downsample  # reshapes the shortcut when stride or width change
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity  # in place on a fresh tensor that autograd does not need
        return self.relu(out)
# [/book:basic-block]


# [book:bottleneck]
class ResidualBottleNeck(nn.Module):
    """1x1 (reduce) -> 3x3 -> 1x1 (expand by 4) plus a shortcut: ResNet-50, -101, -152.

    The stride sits on the 3x3 convolution, as in torchvision ("ResNet v1.5"); the paper
    put it on the first 1x1 convolution.
    """

    expansion: int = 4

    def __init__(self, in_channels: int, channels: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = nn.Conv2d(channels, channels * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)
# [/book:bottleneck]


# [book:resnet-base]
class ResNetBase(nn.Module):
    """Stem, four stages of residual blocks, global average pooling, classifier."""

    def __init__(self, block: type[ResidualBasicBlock | ResidualBottleNeck], layers: list[int],
                 in_channels: int = 3, num_classes: int = 1000,
                 zero_init_residual: bool = False) -> None:
        super().__init__()
        self.in_channels = 64  # channels entering the next stage; updated by _make_layer
        # Stem: 7x7 stride-2 convolution, then 3x3 stride-2 max pooling: 224 -> 112 -> 56.
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        # The paper's conv2_x ... conv5_x.
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        # Averages whatever spatial size is left, so any input size works.
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        # Optional: start every residual branch at zero, so each block begins as the identity.
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, ResidualBottleNeck):
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, ResidualBasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, channels: int, blocks: int, stride: int = 1) -> nn.Sequential:
        """One stage: a first block that may change size and width, then `blocks - 1` more."""
        downsample = None
        out_channels = channels * block.expansion
        if stride != 1 or self.in_channels != out_channels:
            # The shortcut must match the block's output: halve H and W and/or widen C.
            downsample = nn.Sequential(
                nn.Conv2d(self.in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        layers = [block(self.in_channels, channels, stride, downsample)]
        self.in_channels = out_channels
        layers += [block(self.in_channels, channels) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)
# [/book:resnet-base]


# [book:constructors]
def my_resnet18(in_channels: int = 3, num_classes: int = 1000, **kwargs) -> ResNetBase:
    return ResNetBase(ResidualBasicBlock, [2, 2, 2, 2], in_channels, num_classes, **kwargs)


def my_resnet34(in_channels: int = 3, num_classes: int = 1000, **kwargs) -> ResNetBase:
    return ResNetBase(ResidualBasicBlock, [3, 4, 6, 3], in_channels, num_classes, **kwargs)


def my_resnet50(in_channels: int = 3, num_classes: int = 1000, **kwargs) -> ResNetBase:
    return ResNetBase(ResidualBottleNeck, [3, 4, 6, 3], in_channels, num_classes, **kwargs)


def my_resnet101(in_channels: int = 3, num_classes: int = 1000, **kwargs) -> ResNetBase:
    return ResNetBase(ResidualBottleNeck, [3, 4, 23, 3], in_channels, num_classes, **kwargs)


def my_resnet152(in_channels: int = 3, num_classes: int = 1000, **kwargs) -> ResNetBase:
    return ResNetBase(ResidualBottleNeck, [3, 8, 36, 3], in_channels, num_classes, **kwargs)
# [/book:constructors]


CONSTRUCTORS = {18: my_resnet18, 34: my_resnet34, 50: my_resnet50, 101: my_resnet101, 152: my_resnet152}


def torchvision_resnet(depth: int, **kwargs) -> nn.Module:
    """torchvision's ResNet of the given depth, randomly initialised (no download)."""
    import torchvision

    return getattr(torchvision.models, f"resnet{depth}")(weights=None, **kwargs)


def randomize_batchnorm(model: nn.Module, generator: torch.Generator | None = None) -> nn.Module:
    """Give every BatchNorm random affine parameters and running statistics, in place.

    A fresh BatchNorm in eval mode is the identity (mean 0, variance 1, weight 1, bias 0),
    so a comparison of two networks would not notice BatchNorms that are missing, swapped or
    misplaced. After this, each one computes a different affine map.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                m.bias.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def stage_shapes(model: nn.Module, input_shape, names=("conv1", "maxpool", "layer1", "layer2",
                                                       "layer3", "layer4", "avgpool")) -> dict:
    """Output shape of each named child of `model` for an input of `input_shape`.

    Runs on the meta device (shapes only, no arithmetic), on a copy of the model's structure.
    """
    import copy

    meta_model = copy.deepcopy(model).to("meta").eval()  # eval: BatchNorm accepts a batch of one
    shapes = {}
    handles = [getattr(meta_model, name).register_forward_hook(
        lambda module, args, output, name=name: shapes.__setitem__(name, tuple(output.shape)))
        for name in names]
    try:
        meta_model(torch.empty(input_shape, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    return {"input": tuple(input_shape), **shapes}
