"""The ResNet chapter's model code: what the chapter's own cells do not check (its equivalence
check with torchvision, for all five depths, runs in the chapter).

The code is the chapter's own: chapters/resnet.ipynb exports its `#| export` cells (ours, the
notes' and the comparison helpers) to booktools.generated.resnet, which these tests import.

Outputs are compared on 64x64 images: every layer of the network runs at any input size
(the final pooling is adaptive), and at 64x64 the last feature map is still 2x2, so the
global pooling averages real positions. That is about 12x cheaper than 224x224.
"""

import math

import pytest
import torch
from torch import nn

from booktools.generated import resnet as rn
from booktools.generated.resnet import notes_resnet

DEPTHS = sorted(rn.CONSTRUCTORS)


def test_constructor_names_are_kept():
    assert [f.__name__ for f in rn.CONSTRUCTORS.values()] == [
        "my_resnet18", "my_resnet34", "my_resnet50", "my_resnet101", "my_resnet152"]


@pytest.mark.parametrize("depth", [18, 50])
def test_same_seed_gives_same_initial_weights(depth):
    torch.manual_seed(7)
    theirs = rn.torchvision_resnet(depth, zero_init_residual=True)
    torch.manual_seed(7)
    ours = rn.CONSTRUCTORS[depth](zero_init_residual=True)
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))


def test_the_chapters_equivalence_check_sees_a_missing_relu():
    class NoFinalRelu(rn.ResidualBasicBlock):
        def forward(self, x):
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return out + (x if self.downsample is None else self.downsample(x))

    result = rn.compare_with_torchvision(18, lambda: rn.ResNetBase(NoFinalRelu, [2, 2, 2, 2]), seed=18)
    assert result == {"same init": True, "allclose": False, "bitwise equal": False}


def test_the_chapters_equivalence_check_names_a_missing_parameter():
    class NotesNames(rn.ResidualBasicBlock):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.batchnorm1 = self.bn1
            del self.bn1

    with pytest.raises(RuntimeError, match="layer1.0.bn1.weight"):
        rn.compare_with_torchvision(18, lambda: rn.ResNetBase(NotesNames, [2, 2, 2, 2]))


def test_num_classes_and_in_channels():
    model = rn.my_resnet18(in_channels=1, num_classes=10).eval()
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_zero_init_residual_makes_blocks_start_as_identity():
    model = rn.my_resnet50(zero_init_residual=True)
    x = torch.rand(2, 256, 8, 8)
    assert torch.equal(model.layer1[1](x), x)   # a block without projection


def test_output_size_formula_matches_pytorch():
    for size in range(1, 24):
        for kernel in (1, 3, 4, 7):
            for stride in (1, 2, 3):
                for padding in (0, 1, 3):
                    for dilation in (1, 2, 3):
                        if size + 2 * padding < dilation * (kernel - 1) + 1:
                            continue
                        conv = nn.functional.conv2d(
                            torch.empty(1, 1, size, size, device="meta"),
                            torch.empty(1, 1, kernel, kernel, device="meta"),
                            stride=stride, padding=padding, dilation=dilation)
                        assert conv.shape[-1] == rn.conv_output_size(size, kernel, stride, padding, dilation)
    assert rn.conv_output_size(224, 7, 2, 3) == 112 and math.isclose((224 - 7 + 6) / 2 + 1, 112.5)


def test_stage_shapes():
    shapes = rn.stage_shapes(rn.my_resnet50(), (1, 3, 224, 224))
    assert shapes["layer1"] == (1, 256, 56, 56)
    assert shapes["layer4"] == (1, 2048, 7, 7)
    assert shapes["avgpool"] == (1, 2048, 1, 1)


@pytest.mark.parametrize("depth", DEPTHS)
def test_notes_parameter_difference_is_stem_plus_conv_biases(depth):
    """The chapter's accounting of the notes' parameter count holds at every depth."""
    with torch.device("meta"):
        ours, notes = rn.CONSTRUCTORS[depth](), notes_resnet(depth)
    conv_biases = sum(m.bias.numel() for m in notes.modules() if isinstance(m, nn.Conv2d))
    stem = notes.conv1[0].weight.numel() - ours.conv1.weight.numel()
    assert rn.count_parameters(notes) - rn.count_parameters(ours) == conv_biases + stem


def test_notes_fixed_pooling_breaks_where_ours_does_not():
    torch.manual_seed(0)
    notes, ours = notes_resnet(18).eval(), rn.my_resnet18().eval()
    small = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert ours(small).shape == (1, 1000)
        with pytest.raises(RuntimeError, match="Output size is too small"):
            notes(small)


def test_notes_448_error_names_1000_classes_not_10():
    """The notes' fixed pooling at 448x448: the classifier's full shape is in the message."""
    torch.manual_seed(0)
    notes = notes_resnet(18).eval()
    with torch.no_grad(), pytest.raises(RuntimeError, match=r"\(1x2048 and 512x1000\)"):
        notes(torch.randn(1, 3, 448, 448))


def test_plain_block_is_the_basic_block_without_its_shortcut():
    torch.manual_seed(0)
    plain, residual = rn.PlainBasicBlock(8, 8).eval(), rn.ResidualBasicBlock(8, 8).eval()
    plain.load_state_dict(residual.state_dict(), strict=True)
    x = torch.rand(2, 8, 5, 5)
    with torch.no_grad():
        branch = residual.bn2(residual.conv2(residual.relu(residual.bn1(residual.conv1(x)))))
        assert torch.equal(plain(x), torch.relu(branch))
        assert torch.equal(residual(x), torch.relu(branch + x))


def test_shortcuts_keep_the_gradient_from_growing_geometrically():
    """The chapter's gradient experiment, on random images: at initialisation, without
    shortcuts every block enlarges the gradient on its way back, by more per block than
    with shortcuts, and the stem's gradient ends up much larger."""
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(16, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (16,), generator=generator)
    growth, stem = {}, {}
    for kind, block in (("residual", rn.ResidualBasicBlock), ("plain", rn.PlainBasicBlock)):
        torch.manual_seed(0)
        net = rn.ResNetBase(block, [3, 4, 6, 3], in_channels=1, num_classes=10)
        g = rn.block_input_gradients(net, images, labels)
        assert len(g) == 16
        growth[kind] = (g[0] / g[-1]) ** (1 / (len(g) - 1))
        stem[kind] = net.conv1.weight.grad.norm().item()
        if kind == "plain":
            assert all(a > b for a, b in zip(g, g[1:]))
    assert growth["residual"] < growth["plain"]
    assert stem["plain"] > 3 * stem["residual"]
