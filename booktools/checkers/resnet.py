"""Checkers for the exercises of chapters/resnet.ipynb.

`check_basic_block(Block)` and `check_bottleneck(Block)` build the reader's block and
torchvision's with the same arguments (stride 1 without a projection, stride 2 with the
`downsample` projection that `_make_layer` would give it), compare their parameter names and
shapes, load torchvision's weights into the reader's block with `strict=True`, and compare the
outputs on random images. BatchNorm gets random statistics first: a fresh BatchNorm in eval mode
only divides by sqrt(1 + eps), too close to the identity for a comparison within float tolerance
to see one that is missing or misplaced.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from booktools.checkers import fail, passed
from booktools.generated.resnet import randomize_batchnorm


def _projection(in_channels: int, out_channels: int, stride: int) -> nn.Module:
    """The shortcut projection `_make_layer` builds: strided 1x1 convolution and BatchNorm."""
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                         nn.BatchNorm2d(out_channels))


def _names(keys) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")


def _check_block(exercise: str, Block, Reference, cases, size: int = 9, seed: int = 0) -> None:
    if getattr(Block, "expansion", None) != Reference.expansion:
        fail(exercise, f"{getattr(Block, '__name__', Block)}.expansion is "
                       f"{getattr(Block, 'expansion', 'missing')!r}; _make_layer needs {Reference.expansion} "
                       "(output channels = channels * expansion)")
    generator = torch.Generator().manual_seed(seed)
    for in_channels, channels, stride in cases:
        out_channels = channels * Reference.expansion
        needs_projection = stride != 1 or in_channels != out_channels
        label = (f"{Block.__name__}({in_channels}, {channels}, stride={stride}"
                 + (", downsample=<1x1 conv + BatchNorm>)" if needs_projection else ")"))
        projection = _projection(in_channels, out_channels, stride) if needs_projection else None
        theirs = Reference(in_channels, channels, stride, copy.deepcopy(projection))
        try:
            ours = Block(in_channels, channels, stride, copy.deepcopy(projection))
        except Exception as error:  # noqa: BLE001 - any failure to build is the reader's to see
            fail(exercise, f"{label} could not be built: {type(error).__name__}: {error}")
        if not isinstance(ours, nn.Module):
            fail(exercise, f"{label} is a {type(ours).__name__}, not an nn.Module")
        expected, got = theirs.state_dict(), ours.state_dict()
        missing, unexpected = set(expected) - set(got), set(got) - set(expected)
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing {_names(missing)}")
            if unexpected:
                parts.append(f"unexpected {_names(unexpected)}")
            fail(exercise, f"{label}: its parameter and buffer names differ from torchvision's: "
                           + "; ".join(parts) + " (torchvision's weights would not load)")
        for key, tensor in expected.items():
            if got[key].shape != tensor.shape:
                fail(exercise, f"{label}: {key} has shape {tuple(got[key].shape)}, "
                               f"torchvision's has {tuple(tensor.shape)}")
        randomize_batchnorm(theirs, generator)
        ours.load_state_dict(theirs.state_dict(), strict=True)
        theirs.eval()
        ours.eval()
        x = torch.randn(2, in_channels, size, size, generator=generator)
        with torch.no_grad():
            want = theirs(x.clone())
            try:
                out = ours(x.clone())
            except Exception as error:  # noqa: BLE001
                fail(exercise, f"{label} on an input of shape {tuple(x.shape)} raised "
                               f"{type(error).__name__}: {str(error).splitlines()[0]}")
        if not isinstance(out, torch.Tensor):
            fail(exercise, f"{label} returned a {type(out).__name__}, not a tensor")
        if out.shape != want.shape:
            fail(exercise, f"{label} on an input of shape {tuple(x.shape)}: output shape "
                           f"{tuple(out.shape)}, expected {tuple(want.shape)}")
        if not torch.allclose(out, want, rtol=1e-4, atol=1e-5):
            hint = ""
            if (out < 0).any():
                hint = " (it has negative values: is the ReLU after the addition missing?)"
            fail(exercise, f"{label}: wrong output with torchvision's weights loaded, largest difference "
                           f"{(out - want).abs().max().item():.2g}{hint}")
    passed(exercise, f"same parameters and outputs as torchvision's {Reference.__name__} "
                     f"in {len(cases)} configurations")


def check_basic_block(Block) -> None:
    """`Block(in_channels, channels, stride=1, downsample=None)` must be torchvision's BasicBlock:
    same parameter names and shapes, and the same outputs once it holds the same weights."""
    from torchvision.models.resnet import BasicBlock

    _check_block("resnet, basic block", Block, BasicBlock,
                 [(8, 8, 1), (8, 16, 2), (16, 16, 1)])


def check_bottleneck(Block) -> None:
    """`Block(in_channels, channels, stride=1, downsample=None)` must be torchvision's Bottleneck
    (ResNet v1.5: the stride on the 3x3 convolution), checked like `check_basic_block`."""
    from torchvision.models.resnet import Bottleneck

    _check_block("resnet, bottleneck block", Block, Bottleneck,
                 [(16, 4, 1), (8, 4, 1), (16, 8, 2)])


def _notes_name(torchvision_key: str) -> str:
    """The notes' name of the tensor that torchvision calls `torchvision_key`."""
    parts = torchvision_key.split(".")
    if parts[0] == "bn1":
        return ".".join(["conv1", "1"] + parts[1:])
    if parts[0].startswith("layer"):
        parts[0] = f"conv{int(parts[0][5:]) + 1}"
        parts[2] = parts[2].replace("bn", "batchnorm")
    return ".".join(parts)


def check_notes_to_torchvision(rename) -> None:
    """`rename(notes_state_dict) -> dict` must turn the notes' ResNet `state_dict` into
    torchvision's names, dropping the convolution biases, for ResNet-18 and ResNet-50. Every
    tensor it keeps must be the notes' tensor under torchvision's name; the one it cannot keep
    is the stem weight (3x3 in the notes, 7x7 in torchvision), so it must leave that out."""
    import torchvision

    from booktools.generated.resnet import notes_resnet

    exercise = "resnet, notes to torchvision"
    for depth in (18, 50):
        torch.manual_seed(depth)
        notes_model = notes_resnet(depth)
        randomize_batchnorm(notes_model, torch.Generator().manual_seed(depth))  # every tensor distinct
        notes = notes_model.state_dict()
        with torch.device("meta"):
            target = getattr(torchvision.models, f"resnet{depth}")(weights=None).state_dict()
        result = rename(dict(notes))
        if not isinstance(result, dict):
            fail(exercise, f"rename returned a {type(result).__name__}, not a dict")
        expected_keys = set(target) - {"conv1.weight"}
        missing, unexpected = expected_keys - set(result), set(result) - expected_keys
        if "conv1.weight" in result:
            fail(exercise, f"ResNet-{depth}: conv1.weight is kept, but the notes' stem weight has shape "
                           f"{tuple(result['conv1.weight'].shape)} and torchvision's (64, 3, 7, 7): leave it out")
        if missing:
            fail(exercise, f"ResNet-{depth}: torchvision's {_names(missing)} got no tensor")
        if unexpected:
            fail(exercise, f"ResNet-{depth}: {_names(unexpected)} are not torchvision names "
                           "(conv biases must be dropped)")
        for key, tensor in result.items():
            if not isinstance(tensor, torch.Tensor) or tensor.shape != target[key].shape:
                fail(exercise, f"ResNet-{depth}: {key} has shape {tuple(getattr(tensor, 'shape', ()))}, "
                               f"torchvision's {tuple(target[key].shape)}")
            source = _notes_name(key)
            if tensor is notes[source] or torch.equal(tensor, notes[source]):
                continue
            holds = next((k for k, t in notes.items() if t is tensor), None) or next(
                (k for k, t in notes.items() if t.shape == tensor.shape and torch.equal(t, tensor)), None)
            if holds is None:
                fail(exercise, f"ResNet-{depth}: the tensor under {key} is none of the notes' tensors "
                               f"(expected the notes' {source})")
            fail(exercise, f"ResNet-{depth}: {key} holds the notes' {holds}, expected {source}")
    passed(exercise, "ResNet-18 and ResNet-50: every notes tensor under torchvision's name, stem left out")


def check_bias_folding(fold) -> None:
    """`fold(conv, bn) -> (conv_without_bias, bn_folded)` must give, in eval mode, the same outputs
    as `bn(conv(x))` for a convolution with a bias, with `conv_without_bias.bias is None`."""
    exercise = "resnet, folding a conv bias into BatchNorm"
    generator = torch.Generator().manual_seed(0)
    for in_channels, out_channels, kernel, stride in [(3, 8, 3, 1), (4, 6, 1, 2)]:
        torch.manual_seed(in_channels)
        conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=kernel // 2)
        bn = nn.BatchNorm2d(out_channels)
        randomize_batchnorm(bn, generator)
        with torch.no_grad():
            conv.bias.normal_(generator=generator)
        conv.eval()
        bn.eval()
        x = torch.randn(2, in_channels, 7, 7, generator=generator)
        with torch.no_grad():
            want = bn(conv(x))
        result = fold(copy.deepcopy(conv), copy.deepcopy(bn))
        if not (isinstance(result, tuple) and len(result) == 2):
            fail(exercise, f"fold returned {type(result).__name__}, not a pair (conv, bn)")
        new_conv, new_bn = result
        if getattr(new_conv, "bias", None) is not None:
            fail(exercise, "the returned convolution still has a bias: build it with bias=False")
        new_conv.eval()
        new_bn.eval()
        with torch.no_grad():
            got = new_bn(new_conv(x))
        if not torch.allclose(got, want, atol=1e-5):
            fail(exercise, f"Conv2d({in_channels}, {out_channels}, {kernel}, stride={stride}) then BatchNorm: "
                           f"outputs differ by up to {(got - want).abs().max().item():.3g} in eval mode")
    passed(exercise, "eval-mode outputs equal without the conv bias, in 2 configurations")
