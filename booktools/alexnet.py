"""AlexNet, built by hand, and the tools the AlexNet chapter uses to look inside PyTorch.

- `AlexNet`: the network exactly as `torchvision.models.alexnet` builds it (same modules,
  same names, same construction order), so its `state_dict` loads strictly into ours.
- `AlexNet2012`: the two-GPU network of Krizhevsky et al. (2012), whose GPU split is a
  grouped convolution.
- `class_hierarchy` / `draw_class_hierarchy`: the inheritance graph of live classes, read
  from their method resolution order (MRO).
- `aten_call_tree`: the ATen operators one call runs, in call order, from `torch.profiler`.
- `conv_cost`: parameters and FLOPs of a convolution, counted by PyTorch's FlopCounterMode.
- `toy_backend`: a pretend accelerator registered under the `PrivateUse1` dispatch key.
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch import nn

from booktools.profiling import call_tree, print_call_tree  # noqa: F401  (chapters call ax.print_call_tree)


# [book:alexnet]
class AlexNet(nn.Module):
    """AlexNet as torchvision defines it: five convolutions, then three fully connected layers.

    This is the single-column variant of "One weird trick for parallelizing convolutional
    neural networks" (Krizhevsky, 2014): 64/192/384/256/256 channels, no local response
    normalisation, and an adaptive pooling layer so any input of at least 63x63 works.
    """

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),     # features.0
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),              # features.3
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),             # features.6
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),             # features.8
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),             # features.10
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        # Makes the classifier's input 256x6x6 whatever the image size.
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),                              # classifier.1
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),                                     # classifier.4
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),                              # classifier.6
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)
# [/book:alexnet]


# [book:alexnet2012]
class AlexNet2012(nn.Module):
    """The network of the 2012 paper, trained on two GPUs with half of each layer on each.

    conv2, conv4 and conv5 only see the channels on their own GPU: that is a convolution
    with groups=2. `groups=1` gives the same widths with every channel connected.
    Expects 227x227 inputs (the paper's "224" does not fit its own layer sizes).
    """

    def __init__(self, num_classes: int = 1000, groups: int = 2) -> None:
        super().__init__()
        # PyTorch's LocalResponseNorm divides alpha by `size`; the paper does not, so the
        # paper's alpha=1e-4 becomes 5 * 1e-4 here.
        def lrn():
            return nn.LocalResponseNorm(size=5, alpha=5e-4, beta=0.75, k=2.0)

        self.features = nn.Sequential(
            nn.Conv2d(3, 96, kernel_size=11, stride=4), nn.ReLU(inplace=True), lrn(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(96, 256, kernel_size=5, padding=2, groups=groups), nn.ReLU(inplace=True), lrn(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(256, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, kernel_size=3, padding=1, groups=groups), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1, groups=groups), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
# [/book:alexnet2012]


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------- class hierarchy
def class_hierarchy(classes) -> list[tuple[type, type]]:
    """(subclass, base) edges of the inheritance graph of `classes`, from their MROs.

    Every class in each MRO is included, up to but not including `object`.
    """
    edges = []
    for cls in classes:
        for klass in cls.__mro__:
            for base in klass.__bases__:
                if base is not object and (klass, base) not in edges:
                    edges.append((klass, base))
    return edges


def _depths(edges, root):
    """Distance of every class from `root` along the longest chain of bases."""
    bases = {}
    for child, base in edges:
        bases.setdefault(child, []).append(base)

    def depth(cls):
        return 0 if cls is root else 1 + max(depth(b) for b in bases[cls])

    nodes = {c for edge in edges for c in edge}
    return {cls: depth(cls) for cls in nodes}


def draw_class_hierarchy(classes, root=nn.Module, ax=None):
    """Draw the inheritance graph of `classes` (computed by `class_hierarchy`), root on top.

    Classes in `classes` are drawn in blue, the bases they share in grey. A class sits under
    its (first) base; siblings are spread out side by side.
    """
    import matplotlib.pyplot as plt

    edges = class_hierarchy(classes)
    depth = _depths(edges, root)
    children = {}
    for child, base in edges:
        if base is child.__bases__[0]:
            children.setdefault(base, []).append(child)

    def width(cls):  # number of leaf columns under cls
        kids = children.get(cls, [])
        return sum(width(k) for k in kids) if kids else 1

    position = {}

    def place(cls, left):
        kids = sorted(children.get(cls, []), key=lambda c: (-width(c), c.__name__))
        position[cls] = (left + (width(cls) - 1) / 2, -depth[cls])
        for kid in kids:
            place(kid, left)
            left += width(kid)

    place(root, 0)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 * width(root), 1.0 * (max(depth.values()) + 1)),
                             gridspec_kw=dict(left=0.01, right=0.99, bottom=0.02, top=0.85))
    for child, base in edges:
        (x0, y0), (x1, y1) = position[child], position[base]
        ax.annotate("", xy=(x1, y1 - 0.15), xytext=(x0, y0 + 0.15),
                    arrowprops=dict(arrowstyle="-|>", color="0.4", lw=1))
    for cls, (x, y) in position.items():
        leaf = cls in classes
        ax.text(x, y, cls.__name__, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round,pad=0.3", fc="#cfe3f5" if leaf else "#f2f2f2",
                          ec="#2a6099" if leaf else "0.5"))
    ax.set(xlim=(-0.6, width(root) - 0.4), ylim=(-max(depth.values()) - 0.4, 0.4))
    ax.axis("off")
    return ax


# --------------------------------------------------------------------------- profiler trace
# Ops that only allocate or re-describe memory; hiding them leaves the compute path.
BOOKKEEPING_OPS = frozenset({
    "aten::empty", "aten::empty_strided", "aten::view", "aten::as_strided", "aten::as_strided_",
    "aten::resize_", "aten::reshape", "aten::_reshape_alias", "aten::expand", "aten::t",
    "aten::transpose", "aten::contiguous", "aten::clone", "aten::empty_like", "aten::copy_",
    "aten::_nnpack_available", "aten::detach", "aten::lift_fresh", "aten::alias",
    "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::resolve_conj",
    "aten::resolve_neg", "aten::zeros", "aten::zero_", "aten::fill_",
})


def aten_call_tree(fn, *args, hide=BOOKKEEPING_OPS, **kwargs):
    """Run fn(*args, **kwargs) under torch.profiler; return its ATen calls as (depth, name).

    The list is in call order, depth 0 being the operators called from Python. Names in
    `hide` are left out (with their children). No timings: those vary run to run.
    """
    return call_tree(fn, *args, include=lambda event: event.name.startswith("aten::"), hide=hide, **kwargs)


# ------------------------------------------------------------------------ convolution cost
def conv_cost(conv: nn.Conv2d, input_shape) -> tuple[int, int]:
    """(parameters, FLOPs of one forward call) of `conv` on an input of `input_shape`.

    FLOPs are counted by torch.utils.flop_counter (2 per multiply-add), on the meta device,
    so nothing is computed.
    """
    from torch.utils.flop_counter import FlopCounterMode

    meta_conv = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                          conv.padding, conv.dilation, conv.groups, conv.bias is not None,
                          device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        meta_conv(torch.empty(input_shape, device="meta"))
    return count_parameters(meta_conv), counter.get_total_flops()


# ------------------------------------------------------------------------------ toy backend
# [book:toy-backend]
@contextlib.contextmanager
def toy_backend(log: list):
    """Pretend an accelerator is attached under the PrivateUse1 dispatch key.

    Inside the block, every operator call also carries the PrivateUse1 key (added to the
    thread-local "included" set), which outranks CPU. We register one kernel for it,
    `aten::convolution`; it logs the call and computes on the CPU with the normal keys.
    Every other operator has no PrivateUse1 kernel and fails, as it would for a new device.
    """
    normal_keys = (torch._C._dispatch_tls_local_include_set(),
                   torch._C._dispatch_tls_local_exclude_set())

    def convolution(input, weight, bias, stride, padding, dilation, transposed,
                    output_padding, groups):
        log.append(f"toy convolution kernel: input {tuple(input.shape)}, weight {tuple(weight.shape)}")
        with torch._C._ForceDispatchKeyGuard(*normal_keys):
            return torch.ops.aten.convolution.default(
                input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)

    library = torch.library.Library("aten", "IMPL")
    library.impl("convolution", convolution, "PrivateUse1")
    try:
        with torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.PrivateUse1):
            yield
    finally:
        library._destroy()  # unregisters the kernel
# [/book:toy-backend]


# ------------------------------------------------------------------------- dispatch tables
def dispatch_table(op: str, keys) -> dict[str, str]:
    """For each dispatch key in `keys`: what the dispatcher runs for operator `op`.

    Parsed from torch._C._dispatch_dump_table; the registering file is reduced to its name
    (no build-machine paths). Keys with nothing registered say so.
    """
    import re

    entries = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        match = re.match(r"(\w+): (fallthrough )?registered at (\S+) \[(.+)\]$", line)
        if match:
            key, fallthrough, where, kind = match.groups()
            source = where.rsplit("/", 1)[-1].split(":")[0]
            entries[key] = f"{kind}{' (fallthrough)' if fallthrough else ''}, from {source}"
    return {key: entries.get(key, "nothing registered") for key in keys}


# ------------------------------------------------------------------- generated Python binding
def _torchgen_file(relative: str) -> str:
    import torchgen

    return os.path.join(os.path.dirname(torchgen.__file__), "packaged", relative)


def native_functions_entry(name: str) -> list[dict]:
    """The entries of ATen's native_functions.yaml (shipped inside torchgen) for `name`."""
    import yaml

    with open(_torchgen_file("ATen/native/native_functions.yaml"), encoding="utf-8") as f:
        entries = yaml.safe_load(f)
    return [e for e in entries if e["func"].split("(")[0].split(".")[0] == name]


def generated_python_binding(name: str) -> str:
    """The C++ function that binds `torch.<name>` to Python, generated now by torchgen.

    This is the code generator PyTorch's build runs over native_functions.yaml to write
    python_torch_functions_*.cpp; here we run it for one operator only.
    """
    from torchgen.api.python import PythonSignatureNativeFunctionPair, signature
    from torchgen.context import native_function_manager
    from torchgen.gen import parse_native_yaml
    from torchgen.packaged.autograd.gen_python_functions import method_impl

    parsed = parse_native_yaml(_torchgen_file("ATen/native/native_functions.yaml"),
                               _torchgen_file("ATen/native/tags.yaml"))
    functions = [f for f in parsed.native_functions if str(f.func.name.name) == name]
    pairs = []
    for f in functions:
        with native_function_manager(f):
            pairs.append(PythonSignatureNativeFunctionPair(signature=signature(f, method=False), function=f))
    code = method_impl(functions[0].func.name.name, None, pairs, method=False, symint=True)
    return code.lstrip("\\\n").rstrip() + "\n"
