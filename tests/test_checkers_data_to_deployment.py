"""The checkers of chapters/data_to_deployment.ipynb accept a right answer and reject wrong
ones with a message that says what is wrong."""

from pathlib import Path

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from booktools.checkers import CheckFailed
from booktools.checkers.data_to_deployment import check_pad_collate, check_random_hflip, check_write_idx


# ------------------------------------------------------------------------------ random_hflip
def random_hflip(images, generator):
    flip = torch.rand(len(images), generator=generator) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def test_random_hflip_right_answer_passes(capsys):
    check_random_hflip(random_hflip)
    assert "random_hflip: passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda images, g: torch.where((torch.rand(len(images), generator=g) < 0.5)[:, None, None, None],
                                   images.flip(-2), images), "upside down"),
    (lambda images, g: images.flip(-1), "mirrored 100% of the images"),
    (lambda images, g: torch.where((torch.rand(len(images)) < 0.5)[:, None, None, None], images.flip(-1), images),
     "equally seeded generators gave different batches"),
    (lambda images, g: images.copy_(random_hflip(images, g)), "modified its input in place"),
    (lambda images, g: random_hflip(images, g).float(), "expected the same shape and dtype"),
])
def test_random_hflip_wrong_answers_are_rejected(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        check_random_hflip(wrong)


def test_random_hflip_checker_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_random_hflip(random_hflip)
    assert torch.equal(torch.rand(3), expected)


# ------------------------------------------------------------------------------- pad_collate
def pad_collate(samples):
    lengths = torch.tensor([len(s) for s in samples])
    padded = samples[0].new_zeros((len(samples), int(lengths.max()), *samples[0].shape[1:]))
    for row, sequence in zip(padded, samples):
        row[:len(sequence)] = sequence
    return padded, lengths


def test_pad_collate_right_answers_pass(capsys):
    check_pad_collate(pad_collate)
    check_pad_collate(lambda samples: (pad_sequence(samples, batch_first=True), torch.tensor([len(s) for s in samples])))
    assert capsys.readouterr().out.count("pad_collate: passed") == 2


def padded_in_front(samples):
    padded, lengths = pad_collate([s.flip(0) for s in samples])
    return padded.flip(1), lengths


@pytest.mark.parametrize("wrong, message", [
    (padded_in_front, "padded in front"),
    (lambda samples: (pad_collate(samples)[0], [len(s) for s in samples]), "lengths is a list"),
    (lambda samples: (pad_collate(samples)[0], torch.tensor([len(s) for s in samples], dtype=torch.int32)),
     "expected an int64 tensor"),
    (lambda samples: pad_collate(samples)[0], "expected a pair"),
    (lambda samples: (pad_collate(samples)[0].float(), pad_collate(samples)[1]), "padded is a torch.float32"),
])
def test_pad_collate_wrong_answers_are_rejected(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        check_pad_collate(wrong)


# --------------------------------------------------------------------------------- write_idx
def write_idx(path, tensor):
    header = bytes([0, 0, 0x08, tensor.dim()]) + b"".join(n.to_bytes(4, "big") for n in tensor.shape)
    Path(path).write_bytes(header + tensor.contiguous().numpy().tobytes())


def test_write_idx_right_answer_passes(capsys):
    check_write_idx(write_idx)
    assert "write_idx: passed" in capsys.readouterr().out


def test_write_idx_output_is_read_back_by_the_chapter_reader(tmp_path):
    images = torch.randint(0, 256, (4, 28, 28), dtype=torch.uint8)
    write_idx(tmp_path / "images", images)
    data = (tmp_path / "images").read_bytes()
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(data[3])]
    assert shape == [4, 28, 28] and torch.equal(torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).view(shape), images)


def little_endian(path, tensor):
    header = bytes([0, 0, 0x08, tensor.dim()]) + b"".join(n.to_bytes(4, "little") for n in tensor.shape)
    Path(path).write_bytes(header + tensor.contiguous().numpy().tobytes())


def storage_order(path, tensor):
    header = bytes([0, 0, 0x08, tensor.dim()]) + b"".join(n.to_bytes(4, "big") for n in tensor.shape)
    Path(path).write_bytes(header + bytes(tensor.untyped_storage()))


def gzipped(path, tensor):
    import gzip
    header = bytes([0, 0, 0x08, tensor.dim()]) + b"".join(n.to_bytes(4, "big") for n in tensor.shape)
    Path(path).write_bytes(gzip.compress(header + tensor.contiguous().numpy().tobytes()))


def float_type_code(path, tensor):
    header = bytes([0, 0, 0x0D, tensor.dim()]) + b"".join(n.to_bytes(4, "big") for n in tensor.shape)
    Path(path).write_bytes(header + tensor.contiguous().numpy().tobytes())


@pytest.mark.parametrize("wrong, message", [
    (little_endian, "they are little-endian"),
    (storage_order, r"call \.contiguous\(\) first"),
    (gzipped, "gzipped"),
    (float_type_code, "the file starts with the bytes 00 00 0d 01"),
    (lambda path, tensor: None, "wrote no file"),
])
def test_write_idx_wrong_answers_are_rejected(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        check_write_idx(wrong)
