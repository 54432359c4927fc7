"""Recreate this folder's files from the original Fashion-MNIST release.

    python data/fashion-mnist/make_subset.py [SOURCE_DIR]

SOURCE_DIR holds the four original .gz files (default: Debian's dataset-fashion-mnist
package, /usr/share/datasets/fashion-mnist). The test split is copied unchanged; the training
split is cut to its first TRAIN_EXAMPLES examples (IDX header rewritten, pixels and labels
untouched) to keep the repository small.
"""

import gzip
import shutil
import struct
import sys
from pathlib import Path

TRAIN_EXAMPLES = 10_000
HERE = Path(__file__).resolve().parent


def cut_idx(src: Path, dst: Path, count: int) -> None:
    data = gzip.decompress(src.read_bytes())
    magic, total = struct.unpack(">II", data[:8])
    ndim = magic & 0xFF
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    if count > total:
        raise ValueError(f"{src} has only {total} examples, asked for {count}")
    item = 1
    for d in dims[1:]:
        item *= d
    header = struct.pack(">I", magic) + struct.pack(f">{ndim}I", count, *dims[1:])
    body_start = 4 + 4 * ndim
    body = data[body_start : body_start + count * item]
    with gzip.GzipFile(dst, "wb", mtime=0) as f:  # mtime=0: byte-identical on every run
        f.write(header + body)


def main(source: Path) -> None:
    for kind in ("images-idx3", "labels-idx1"):
        cut_idx(source / f"train-{kind}-ubyte.gz", HERE / f"train-{kind}-ubyte.gz", TRAIN_EXAMPLES)
        shutil.copyfile(source / f"t10k-{kind}-ubyte.gz", HERE / f"t10k-{kind}-ubyte.gz")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"))
