"""LinearLayer: an nn.Module on top of mylinearops.linearop."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .ops import linearop

__all__ = ["LinearLayer"]


class LinearLayer(nn.Module):
    """Y = X @ W + b, usable wherever nn.Linear is.

    Unlike nn.Linear, ``weight`` has shape (in_features, out_features), as in
    the notes: the forward is then a plain ``X @ W`` with no transpose. Use
    ``LinearLayer.from_linear`` to copy an nn.Linear (weight = linear.weight.T).

    Initialisation is nn.Linear's: W and b ~ U(-1/sqrt(in_features),
    1/sqrt(in_features)). For W that is what nn.Linear's
    kaiming_uniform_(a=sqrt(5)) works out to (gain sqrt(1/3) times
    sqrt(3/fan_in)); it keeps each output's variance independent of the layer
    width, and matching it means swapping nn.Linear for LinearLayer changes
    nothing about training but the kernels.

    ``algo`` selects the kernel (see mylinearops.available_algos) for the
    forward and the backward.
    """

    __constants__ = ["in_features", "out_features"]
    in_features: int
    out_features: int
    weight: Tensor
    bias: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        algo: str = "auto",
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.algo = algo
        self.weight = nn.Parameter(torch.empty((in_features, out_features), **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    # [book:linear-layer-init]
    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    # [/book:linear-layer-init]

    def forward(self, input: Tensor) -> Tensor:
        return linearop(input, self.weight, self.bias, algo=self.algo)

    def extra_repr(self) -> str:
        algo = "" if self.algo == "auto" else f", algo={self.algo!r}"
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}{algo}"

    @classmethod
    def from_linear(cls, linear: nn.Linear, *, algo: str = "auto") -> LinearLayer:
        """A LinearLayer computing exactly what ``linear`` computes (copied, not shared)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"LinearLayer.from_linear expects an nn.Linear, got {type(linear).__name__}")
        w = linear.weight
        layer = cls(
            linear.in_features, linear.out_features, linear.bias is not None, device=w.device, dtype=w.dtype, algo=algo
        )
        with torch.no_grad():
            layer.weight.copy_(w.t())
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer
