"""Checkers for the exercises of chapters/data_to_deployment.ipynb."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from booktools.checkers import fail, passed


def _describe(tensor) -> str:
    if not isinstance(tensor, torch.Tensor):
        return f"a {type(tensor).__name__}"
    return f"a {tensor.dtype} tensor of shape {tuple(tensor.shape)}"


def check_random_hflip(random_hflip, seed: int = 0) -> None:
    """`random_hflip(images, generator) -> images` must mirror each image of a batch
    [N, C, H, W] left to right (the last dimension) with probability 1/2, leave the others
    alone, draw its coin flips from `generator` only, and not modify its input."""
    exercise = "data_to_deployment, random_hflip"
    gen = torch.Generator().manual_seed(seed)  # the test batches; the global generator is left alone
    cases = [torch.randn(1000, 1, 28, 28, generator=gen),
             torch.randint(0, 256, (64, 1, 28, 28), dtype=torch.uint8, generator=gen),
             torch.randn(200, 3, 5, 7, generator=gen), torch.randn(1, 1, 4, 4, generator=gen), torch.randn(0, 1, 28, 28)]
    for images in cases:
        original = images.clone()
        got = random_hflip(images, torch.Generator().manual_seed(seed))
        shape = f"a batch of shape {tuple(images.shape)} ({images.dtype})"
        if not isinstance(got, torch.Tensor) or got.shape != images.shape or got.dtype != images.dtype:
            fail(exercise, f"on {shape} it returned {_describe(got)}; expected the same shape and dtype")
        if not torch.equal(images, original):
            fail(exercise, f"on {shape} it modified its input in place; return a new tensor instead")
        same = (got == images).flatten(1).all(1)
        mirrored = (got == images.flip(-1)).flatten(1).all(1)
        symmetric = (images == images.flip(-1)).flatten(1).all(1)  # a flip cannot be seen there
        bad = ~(same | mirrored)
        if bad.any():
            i = int(bad.nonzero()[0])
            hint = " (it looks flipped upside down: flip the last dimension)" if torch.equal(got[i], images[i].flip(-2)) else ""
            fail(exercise, f"on {shape}, image {i} is neither itself nor its left-right mirror{hint}")
        if len(images) >= 200:
            share = (mirrored & ~same & ~symmetric).float().mean().item()
            if not 0.35 <= share <= 0.65:
                fail(exercise, f"on {shape} it mirrored {share:.0%} of the images; expected about half")
        again = random_hflip(images, torch.Generator().manual_seed(seed))
        if not torch.equal(got, again):
            fail(exercise, f"on {shape} two calls with equally seeded generators gave different batches: "
                           "draw the coin flips from the generator argument")
    images = cases[0]
    first = random_hflip(images, torch.Generator().manual_seed(seed))
    second = random_hflip(images, torch.Generator().manual_seed(seed + 1))
    if torch.equal(first, second):
        fail(exercise, "generators with different seeds gave the same batch: the generator argument is not used")
    passed(exercise, f"mirrors about half of each batch, reproducibly, on {len(cases)} batches")


def _reference_pad(samples):
    lengths = torch.tensor([len(s) for s in samples], dtype=torch.int64)
    longest = int(lengths.max()) if len(samples) else 0
    padded = samples[0].new_zeros((len(samples), longest, *samples[0].shape[1:]))
    for i, s in enumerate(samples):
        padded[i, :len(s)] = s
    return padded, lengths


def check_pad_collate(pad_collate, seed: int = 0) -> None:
    """`pad_collate(samples) -> (padded, lengths)`: `samples` is a list of tensors whose first
    dimension is a length (any further dimensions are equal); `padded` stacks them into
    [batch, longest, ...], filled with zeros after each sequence's end, in the samples' dtype;
    `lengths` is an int64 tensor of the original lengths. Checked on hand-picked and random
    batches, then inside a DataLoader."""
    exercise = "data_to_deployment, pad_collate"
    gen = torch.Generator().manual_seed(seed)

    def ints(*shape):
        return torch.randint(1, 100, shape, generator=gen)

    batches = {
        "one sequence": [ints(5)],
        "equal lengths": [ints(4), ints(4), ints(4)],
        "the longest last": [ints(2), ints(3), ints(7)],
        "an empty sequence": [ints(3), ints(0), ints(1)],
        "float features [length, 3]": [torch.randn(4, 3, generator=gen), torch.randn(1, 3, generator=gen)],
    }
    for k in range(20):
        lengths = torch.randint(0, 12, (int(torch.randint(1, 9, (), generator=gen)),), generator=gen)
        lengths[0] = max(int(lengths[0]), 1)
        batches[f"random batch {k}"] = [ints(int(n)) for n in lengths]
    for name, samples in batches.items():
        copies = [s.clone() for s in samples]
        got = pad_collate(samples)
        expected_padded, expected_lengths = _reference_pad(samples)
        shapes = [tuple(s.shape) for s in samples]
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            fail(exercise, f"on {name} {shapes} it returned {_describe(got)}; expected a pair (padded, lengths)")
        padded, lengths = got
        if not isinstance(lengths, torch.Tensor) or lengths.dtype != torch.int64 or lengths.shape != expected_lengths.shape:
            fail(exercise, f"on {name} {shapes} lengths is {_describe(lengths)}; expected an int64 tensor of shape "
                           f"{tuple(expected_lengths.shape)}")
        if not torch.equal(lengths, expected_lengths):
            fail(exercise, f"on {name} {shapes} lengths is {lengths.tolist()}; expected {expected_lengths.tolist()}")
        if not isinstance(padded, torch.Tensor) or padded.shape != expected_padded.shape or padded.dtype != expected_padded.dtype:
            fail(exercise, f"on {name} {shapes} padded is {_describe(padded)}; expected "
                           f"{_describe(expected_padded)}")
        if not torch.equal(padded, expected_padded):
            row = next(i for i in range(len(samples)) if not torch.equal(padded[i], expected_padded[i]))
            n = len(samples[row])
            if 0 < n < padded.shape[1] and torch.equal(padded[row, padded.shape[1] - n:], samples[row]):
                fail(exercise, f"on {name} {shapes}, sequence {row} is padded in front; pad after its end")
            fail(exercise, f"on {name} {shapes}, row {row} of padded is {padded[row].tolist()}; "
                           f"expected {expected_padded[row].tolist()}")
        if any(not torch.equal(s, c) for s, c in zip(samples, copies)):
            fail(exercise, f"on {name} {shapes} it modified the samples")
    sequences = [ints(n) for n in (3, 1, 4, 1, 5, 9, 2, 6)]
    loader = DataLoader(sequences, batch_size=3, collate_fn=pad_collate)
    seen = 0
    for padded, lengths in loader:
        for row, n in zip(padded, lengths.tolist()):
            if not torch.equal(row[:n], sequences[seen]):
                fail(exercise, f"in a DataLoader, sequence {seen} did not come back from padded[:, :length]")
            seen += 1
    if seen != len(sequences):
        fail(exercise, f"a DataLoader with this collate_fn gave {seen} sequences, not {len(sequences)}")
    passed(exercise, f"agrees with the reference on {len(batches)} batches and works in a DataLoader")


def _idx_bytes(tensor: torch.Tensor) -> bytes:
    header = bytes([0, 0, 0x08, tensor.dim()]) + b"".join(int(n).to_bytes(4, "big") for n in tensor.shape)
    return header + tensor.contiguous().numpy().tobytes()


def check_write_idx(write_idx, seed: int = 0) -> None:
    """`write_idx(path, tensor)` must write a uint8 tensor of any number of dimensions as an
    uncompressed IDX file: two zero bytes, 0x08 (unsigned bytes), the number of dimensions,
    each size as a 4-byte big-endian integer, then the values in row-major order. Checked
    byte for byte on labels, images, an empty batch, a size above 255 and a transposed view."""
    exercise = "data_to_deployment, write_idx"
    gen = torch.Generator().manual_seed(seed)

    def pixels(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)

    cases = {
        "labels of shape [10]": torch.randint(0, 10, (10,), generator=gen).to(torch.uint8),
        "images of shape [3, 28, 28]": pixels(3, 28, 28),
        "an empty batch of shape [0, 28, 28]": pixels(0, 28, 28),
        "a vector of 300 values (a size above 255)": pixels(300),
        "a transposed view of shape [5, 7]": pixels(7, 5).T,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, tensor) in enumerate(cases.items()):
            original = tensor.clone()
            path = Path(tmp) / f"case-{k}-idx-ubyte"
            write_idx(path, tensor)
            if not path.is_file():
                fail(exercise, f"for {name} it wrote no file at the path it was given")
            data, expected = path.read_bytes(), _idx_bytes(tensor)
            if data[:2] == b"\x1f\x8b":
                fail(exercise, f"for {name} it wrote a gzipped file; write it uncompressed "
                               "(the C++ program reads plain IDX files)")
            if data[:4] != expected[:4]:
                fail(exercise, f"for {name} the file starts with the bytes {data[:4].hex(' ')}; expected "
                               f"{expected[:4].hex(' ')} (two zero bytes, 08 for unsigned bytes, the number of dimensions)")
            end = 4 + 4 * tensor.dim()
            if data[4:end] != expected[4:end]:
                little = b"".join(int(n).to_bytes(4, "little") for n in tensor.shape)
                hint = ": they are little-endian, write them big-endian" if data[4:end] == little else ""
                fail(exercise, f"for {name} the sizes in the header are the bytes {data[4:end].hex(' ')}; expected "
                               f"{expected[4:end].hex(' ')}, each size as 4 bytes, big-endian{hint}")
            if len(data) != len(expected):
                fail(exercise, f"for {name} the file has {len(data)} bytes; expected {len(expected)} "
                               f"({end} of header and one per value)")
            if data != expected:
                storage = bytes(tensor.untyped_storage())
                hint = (" (they are in the order of the tensor's storage; a view's row-major order differs: "
                        "call .contiguous() first)") if data[end:] == storage[:len(data) - end] else ""
                fail(exercise, f"for {name} the values after the header are not the tensor's values in "
                               f"row-major order{hint}")
            if not torch.equal(tensor, original):
                fail(exercise, f"for {name} it modified the tensor")
    passed(exercise, f"writes {len(cases)} tensors byte for byte as IDX files")
