"""Fashion-MNIST, the book's image dataset, loaded with torchvision's own loading code.

The repository carries the full test split and the first 10,000 training examples (see
data/fashion-mnist/README.md). `torchvision.datasets.FashionMNIST` reads the original IDX files,
unpacked, from `<root>/FashionMNIST/raw/`; `fashion_mnist_root` lays them out that way in a
cache folder and returns `root`.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

from booktools.paths import DATA_DIR

SUBSET_DIR = DATA_DIR / "fashion-mnist"
CACHE_DIR = DATA_DIR / ".cache"
# Debian's dataset-fashion-mnist package installs the original release here.
SYSTEM_FULL_DIR = Path("/usr/share/datasets/fashion-mnist")

CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
FILES = (
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
)
SOURCES = ("subset", "full")


def _unpack(src_dir: Path, raw_dir: Path) -> None:
    """Decompress the four .gz files into raw_dir; safe when several processes race."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        target = raw_dir / name
        if target.exists():
            continue
        src = src_dir / f"{name}.gz"
        if not src.is_file():
            raise FileNotFoundError(f"Fashion-MNIST file missing: {src}")
        fd, tmp = tempfile.mkstemp(dir=raw_dir, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as out, gzip.open(src, "rb") as inp:
            shutil.copyfileobj(inp, out)
        os.replace(tmp, target)  # atomic: a reader never sees a half-written file


def fashion_mnist_root(source: str = "subset") -> Path:
    """A folder to pass as `root=` to `torchvision.datasets.FashionMNIST`.

    source="subset": the copy in this repository (10,000 training, 10,000 test images).
    source="full":   all 60,000 training images, from Debian's dataset-fashion-mnist package
                     if installed; otherwise an empty cache folder, for `download=True`.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    root = CACHE_DIR / source
    if source == "subset":
        _unpack(SUBSET_DIR, root / "FashionMNIST" / "raw")
    elif SYSTEM_FULL_DIR.is_dir():
        _unpack(SYSTEM_FULL_DIR, root / "FashionMNIST" / "raw")
    else:
        root.mkdir(parents=True, exist_ok=True)
    return root


def load_fashion_mnist(train: bool, source: str = "subset", transform=None, target_transform=None):
    """torchvision's FashionMNIST dataset for the given split, from `fashion_mnist_root(source)`."""
    from torchvision.datasets import FashionMNIST

    root = fashion_mnist_root(source)
    download = source == "full" and not (root / "FashionMNIST" / "raw" / FILES[0]).exists()
    return FashionMNIST(
        str(root), train=train, transform=transform, target_transform=target_transform, download=download
    )


GPU_FACTS_DIR = DATA_DIR / "gpu-facts"


def recorded_gpu_facts() -> dict:
    """The newest recording of tools/gpu_facts.py in data/gpu-facts/ (what only a GPU can
    show, with the GPU, its driver, the versions and the date it was measured)."""
    runs = [json.loads(path.read_text()) for path in sorted(GPU_FACTS_DIR.glob("*.json"))]
    if not runs:
        raise FileNotFoundError(f"no GPU recording in {GPU_FACTS_DIR}: run tools/gpu_check.sh on a GPU machine")
    return max(runs, key=lambda run: run["date_utc"])
