"""The ResNet of the source notes (seed 003, section 5), reproduced to measure how it differs.

This is the notes' code with its lost indentation restored and nothing else changed
(names prefixed with `Notes` so it cannot be mistaken for the book's `booktools.resnet`).
The ResNet chapter runs it next to ours and torchvision's; do not use it for anything else.
"""

import torch
import torch.nn as nn


class NotesBasicBlock(nn.Module):
    expansion: int = 1

    def __init__(self, in_channels: int, channels: int, stride: int = 1, downsample: nn.Module = None):
        super().__init__()
        self.downsample = downsample
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1)
        self.batchnorm1 = nn.BatchNorm2d(channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1)
        self.batchnorm2 = nn.BatchNorm2d(channels)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        residual = x
        x = self.conv1(x)
        x = self.batchnorm1(x)
        x = self.relu1(x)
        x = self.conv2(x)
        x = self.batchnorm2(x)
        if self.downsample:
            residual = self.downsample(residual)
        x += residual
        x = self.relu2(x)
        return x


class NotesBottleNeck(nn.Module):
    expansion: int = 4

    def __init__(self, in_channels: int, channels: int, stride: int = 1, downsample: nn.Module = None):
        super().__init__()
        self.downsample = downsample
        self.conv1 = nn.Conv2d(in_channels, channels, 1, 1)
        self.batchnorm1 = nn.BatchNorm2d(channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1)
        self.batchnorm2 = nn.BatchNorm2d(channels)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(channels, channels * 4, 1, 1)
        self.batchnorm3 = nn.BatchNorm2d(channels * 4)
        self.relu3 = nn.ReLU()

    def forward(self, x):
        residual = x
        x = self.conv1(x)
        x = self.batchnorm1(x)
        x = self.relu1(x)

        x = self.conv2(x)
        x = self.batchnorm2(x)
        x = self.relu2(x)

        x = self.conv3(x)
        x = self.batchnorm3(x)

        if self.downsample:
            residual = self.downsample(residual)

        x += residual
        x = self.relu3(x)
        return x


class NotesResNetBase(nn.Module):
    def __init__(self, block, layer_blocks: list, input_channels=3):
        super().__init__()
        self.block = block
        # conv1: 7x7
        self.conv1 = nn.Sequential(
            nn.Conv2d(input_channels, 64, 3, 2, 1),
            nn.BatchNorm2d(64),
            nn.ReLU()
        )
        # max pool
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        # conv2 ~ conv5_x
        self.in_channels = 64
        self.conv2 = self._make_layer(64, layer_blocks[0])
        self.conv3 = self._make_layer(128, layer_blocks[1], 2)
        self.conv4 = self._make_layer(256, layer_blocks[2], 2)
        self.conv5 = self._make_layer(512, layer_blocks[3], 2)

        self.downsample = nn.AvgPool2d(7)
        output_numel = 512 * self.block.expansion
        self.fc = nn.Linear(output_numel, 1000)

        # init the weights
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, channel, replicates, stride=1):
        modules = []

        downsample = None
        if stride != 1 or self.in_channels != channel * self.block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.in_channels, channel * self.block.expansion, 1, stride),
                nn.BatchNorm2d(channel * self.block.expansion)
            )

        modules.append(self.block(self.in_channels, channel, stride, downsample))

        self.in_channels = channel * self.block.expansion
        for r in range(1, replicates):
            modules.append(self.block(self.in_channels, channel))
        return nn.Sequential(*modules)

    def forward(self, x):
        # x: shape Bx3x224x224
        x = self.conv1(x)
        x = self.maxpool(x)

        x = self.conv2(x)
        x = self.conv3(x)
        x = self.conv4(x)
        x = self.conv5(x)

        x = self.downsample(x)
        x = torch.flatten(x, start_dim=1)
        x = self.fc(x)

        return x


NOTES_LAYOUT = {
    18: (NotesBasicBlock, [2, 2, 2, 2]),
    34: (NotesBasicBlock, [3, 4, 6, 3]),
    50: (NotesBottleNeck, [3, 4, 6, 3]),
    101: (NotesBottleNeck, [3, 4, 23, 3]),
    152: (NotesBottleNeck, [3, 8, 36, 3]),
}


def notes_resnet(depth: int, in_channels: int = 3) -> NotesResNetBase:
    """The notes' my_resnet<depth>(in_channels)."""
    block, layers = NOTES_LAYOUT[depth]
    return NotesResNetBase(block, layers, in_channels)
