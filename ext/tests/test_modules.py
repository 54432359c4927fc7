"""LinearLayer as a drop-in for nn.Linear."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

import mylinearops
from conftest import cpp_error
from mylinearops import LinearLayer


def test_parameters_shapes_and_repr():
    layer = LinearLayer(784, 256)
    assert layer.weight.shape == (784, 256)  # (in, out), the transpose of nn.Linear's
    assert layer.bias.shape == (256,)
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    assert repr(layer) == "LinearLayer(in_features=784, out_features=256, bias=True)"
    assert "algo='blocked'" in repr(LinearLayer(3, 2, bias=False, algo="blocked"))
    no_bias = LinearLayer(3, 2, bias=False)
    assert no_bias.bias is None and len(list(no_bias.parameters())) == 1


def test_initialisation_matches_nn_linear_bounds():
    layer = LinearLayer(400, 300)
    bound = 1 / math.sqrt(400)
    for p in (layer.weight, layer.bias):
        assert p.abs().max() <= bound
        assert p.abs().max() > 0.9 * bound  # spread over the whole interval
    # Same distribution as nn.Linear: compare standard deviations.
    ref = nn.Linear(400, 300)
    assert abs(layer.weight.std().item() - ref.weight.std().item()) < 0.05 * ref.weight.std().item()


def test_from_linear_computes_the_same_function():
    linear = nn.Linear(10, 7)
    layer = LinearLayer.from_linear(linear)
    x = torch.randn(3, 4, 10)
    torch.testing.assert_close(layer(x), linear(x))
    assert layer.weight.data_ptr() != linear.weight.data_ptr()  # a copy
    no_bias = LinearLayer.from_linear(nn.Linear(10, 7, bias=False))
    assert no_bias.bias is None
    with pytest.raises(TypeError, match="expects an nn.Linear, got Conv1d"):
        LinearLayer.from_linear(nn.Conv1d(1, 1, 1))


def test_double_and_factory_kwargs():
    layer = LinearLayer(5, 3).double()
    assert layer.weight.dtype == torch.float64
    assert layer(torch.randn(2, 5, dtype=torch.float64)).dtype == torch.float64
    meta = LinearLayer(5, 3, device="meta", dtype=torch.float64)
    assert meta.weight.device.type == "meta" and meta.weight.dtype == torch.float64
    assert meta(torch.randn(2, 5, device="meta", dtype=torch.float64)).shape == (2, 3)


def test_state_dict_round_trip():
    layer = LinearLayer(6, 4)
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    restored = LinearLayer(6, 4)
    restored.load_state_dict(torch.load(buffer))
    x = torch.randn(5, 6)
    assert torch.equal(restored(x), layer(x))
    assert set(layer.state_dict()) == {"weight", "bias"}
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        LinearLayer(4, 6).load_state_dict(layer.state_dict())


def _mlp(layer_cls):
    return nn.Sequential(layer_cls(784, 256), nn.ReLU(), layer_cls(256, 256), nn.ReLU(), layer_cls(256, 10))


def _train(model, data, targets, steps=8):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(data[step % len(data)]), targets[step % len(data)])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_trains_like_nn_linear():
    # The 784-256-256-10 MLP of the notes, same initial weights, same batches:
    # the loss curves must agree (up to float32 summation order).
    reference = _mlp(nn.Linear)
    ours = nn.Sequential(*[LinearLayer.from_linear(m) if isinstance(m, nn.Linear) else m for m in reference])
    data = torch.randn(2, 128, 784)
    targets = torch.randint(0, 10, (2, 128))
    ref_losses = _train(reference, data, targets, steps=16)
    our_losses = _train(ours, data, targets, steps=16)
    assert ref_losses[-1] < ref_losses[0] * 0.7  # it actually learns (memorises two batches)
    torch.testing.assert_close(torch.tensor(our_losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-5)
    for ref_m, our_m in zip(reference, ours):
        if isinstance(ref_m, nn.Linear):
            torch.testing.assert_close(our_m.weight, ref_m.weight.t(), rtol=1e-4, atol=1e-5)


def test_usable_in_sequential_with_batch_dims():
    model = nn.Sequential(LinearLayer(8, 4), nn.Tanh(), LinearLayer(4, 2))
    assert model(torch.randn(3, 5, 8)).shape == (3, 5, 2)


def test_algo_reaches_the_kernel():
    X = torch.randn(4, 9)
    outs = [LinearLayer.from_linear(nn.Linear(9, 3), algo=a) for a in ("reference", "packed")]
    outs[1].load_state_dict(outs[0].state_dict())
    torch.testing.assert_close(outs[0](X), outs[1](X))
    with pytest.raises(cpp_error(ValueError), match="unknown algo 'nope'"):
        LinearLayer(9, 3, algo="nope")(X)


def test_exported_names():
    assert {"matmul", "linearop", "LinearLayer", "available_algos"} <= set(mylinearops.__all__)
