"""The C++ inference programs (cpp/inference): what the chapter data_to_deployment does not show.
The chapter builds both programs and checks their predictions on the Fashion-MNIST test split
against Python, bit for bit; here, the build's fallbacks, its cache, and its error messages.

The model here is a stand-in for the chapter's (any TorchScript module that maps uint8 images
[N, 1, 28, 28] to logits and has a `classes` attribute will do), trained for a moment so that
its predictions vary from image to image.
"""

import shutil
import subprocess
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

from booktools.generated import data_to_deployment as cpp_inference  # exported from the chapter's cells
from booktools.generated.data_to_deployment import (
    ToolchainMissing, aoti_cache_key, build_cpp_inference, check_toolchain,
    run_cpp_inference,
)
from booktools.data import CLASSES, fashion_mnist_root, load_fashion_mnist

THREADS = 2
BATCH_SIZE = 500


class TinyClassifier(nn.Module):
    classes: list[str]

    def __init__(self):
        super().__init__()
        self.classes = list(CLASSES)
        self.features = nn.Sequential(nn.Conv2d(1, 4, 5), nn.ReLU(), nn.MaxPool2d(4))
        self.head = nn.Linear(4 * 6 * 6, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() / 255 - 0.5
        return self.head(self.features(x).flatten(1))


@pytest.fixture(scope="module")
def scripted_model(tmp_path_factory):
    torch.manual_seed(0)
    train = load_fashion_mnist(train=True)
    images, labels = train.data[:2000, None], train.targets[:2000]
    model = TinyClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for start in range(0, len(labels), 100):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(images[start:start + 100]), labels[start:start + 100]).backward()
        optimizer.step()
    path = tmp_path_factory.mktemp("model") / "tiny.pt"
    with warnings.catch_warnings():
        # torch.jit is deprecated (FutureWarning) but is what the C++ program loads.
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.script(model.eval()).save(str(path))
    return model, path


def python_logits(path, images):
    """Python running the same TorchScript file, batched and threaded like the C++ run."""
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            loaded = torch.jit.load(str(path))
        with torch.inference_mode():
            return torch.cat([loaded(images[i:i + BATCH_SIZE]) for i in range(0, len(images), BATCH_SIZE)])
    finally:
        torch.set_num_threads(threads)


def check_against_python(build, scripted_model):
    model, path = scripted_model
    raw = fashion_mnist_root() / "FashionMNIST" / "raw"
    test = load_fashion_mnist(train=False)
    result = run_cpp_inference(
        build.executable, path, raw / "t10k-images-idx3-ubyte", raw / "t10k-labels-idx1-ubyte",
        threads=THREADS, batch_size=BATCH_SIZE,
    )
    expected = python_logits(path, test.data[:, None])
    assert result.logits.shape == (10000, 10)
    np.testing.assert_array_equal(result.predictions, expected.argmax(1).numpy())
    np.testing.assert_array_equal(result.logits, expected.numpy())  # bit for bit
    with torch.no_grad():
        eager = model(test.data[:, None])
    np.testing.assert_allclose(result.logits, eager.numpy(), rtol=1e-5, atol=1e-5)
    assert len(set(result.predictions.tolist())) > 3, "the stand-in model should not predict one class"
    accuracy = (result.predictions == test.targets.numpy()).mean()
    assert f"accuracy: {100 * accuracy:.2f}%" in result.stdout
    assert "image 0: " in result.stdout and "(label: Ankle boot)" in result.stdout


@pytest.mark.slow
def test_unusable_cuda_toolkit_falls_back_to_cpu_link_mode(scripted_model, tmp_path, monkeypatch):
    """A CUDA toolkit that looks complete but does not work makes find_package(Torch) fail; the
    build then links libtorch_cpu only (the mode also used where there is no toolkit at all)."""
    fake = tmp_path / "fake-cuda"
    for folder in ("bin", "include", "lib64"):
        (fake / folder).mkdir(parents=True)
    (fake / "bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")
    (fake / "bin" / "nvcc").chmod(0o755)
    (fake / "include" / "cuda_runtime.h").touch()
    (fake / "lib64" / "libcudart.so").touch()
    monkeypatch.setenv("CUDA_HOME", str(fake))  # the first place CMakeLists.txt looks
    build = build_cpp_inference(tmp_path / "build")
    if torch.version.cuda is not None:  # a CUDA build of torch: find_package(Torch) needed the toolkit
        assert build.link_mode == "CPU" and "Caffe2" in build.fallback_reason
    check_against_python(build, scripted_model)
    again = build_cpp_inference(tmp_path / "build")
    assert not again.configured and again.link_mode == build.link_mode


def test_aoti_cache_key_follows_weights_and_metadata(scripted_model):
    model, _ = scripted_model
    example = torch.zeros(2, 1, 28, 28, dtype=torch.uint8)
    exported = torch.export.export(model.eval(), (example,))
    key = aoti_cache_key(exported, {"classes": "a,b"})
    assert key == aoti_cache_key(torch.export.export(model.eval(), (example,)), {"classes": "a,b"})
    assert key != aoti_cache_key(exported, {"classes": "a,c"})
    changed = TinyClassifier()
    changed.load_state_dict(model.state_dict())
    with torch.no_grad():
        changed.head.bias[0] += 1
    assert key != aoti_cache_key(torch.export.export(changed.eval(), (example,)), {"classes": "a,b"})


@pytest.mark.slow  # builds the programs where no build is kept
def test_second_build_only_checks(scripted_model):
    build_cpp_inference()
    again = build_cpp_inference()
    assert not again.configured


@pytest.mark.slow  # builds the programs where no build is kept
def test_bad_arguments_give_a_clear_error(tmp_path):
    build = build_cpp_inference()
    usage = subprocess.run([build.executable], capture_output=True, text=True)
    assert usage.returncode == 1 and "usage: classify MODEL.pt" in usage.stderr
    usage = subprocess.run([build.aoti_executable], capture_output=True, text=True)
    assert usage.returncode == 1 and "usage: classify_aoti MODEL.pt2" in usage.stderr
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model")
    raw = fashion_mnist_root() / "FashionMNIST" / "raw"
    with pytest.raises(RuntimeError, match="classify failed"):
        run_cpp_inference(build.executable, junk, raw / "t10k-images-idx3-ubyte")


def test_missing_toolchain_names_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(ToolchainMissing) as info:
        check_toolchain()
    message = str(info.value)
    assert "CMake" in message and "C++20 compiler" in message and "apt-get install cmake g++" in message
    with pytest.raises(ToolchainMissing):
        build_cpp_inference(cpp_inference.DEFAULT_BUILD_DIR)
