"""The extension's two builds as distributed wheels (booktools.shipping; ext/README.md).

Every wheel `build_wheel` makes is first checked against what its build promises
(`wheel_problems`): the stable-ABI wheel calls into libtorch only through its C shim and carries
the tags and requirements that let pip install it for any torch >= 2.10; the regular wheel says
it needs exactly the torch it was built against; a CUDA build links torch's CUDA libraries, a CPU
build none. (`make wheel` builds the CUDA wheels, where nvcc is, and so checks them.) Here: that
the CPU wheels pass, and that the check catches each way a wheel can break its promise. That the
stable wheel computes under another torch release, and that the regular one fails to load there
with an undefined symbol, the chapter "Shipping the extension" shows (`make test-other-torch`
runs the extension's whole suite there).
"""

from __future__ import annotations

import subprocess
import zipfile

import pytest
import torch

from booktools import shipping

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stable_wheel():
    return shipping.build_wheel("stable", cuda=False)


@pytest.fixture(scope="module")
def regular_wheel():
    return shipping.build_wheel("regular", cuda=False)


def test_the_cpu_wheels_keep_their_promises(stable_wheel, regular_wheel):
    assert shipping.wheel_problems(stable_wheel, "stable", cuda=False) == []
    assert shipping.wheel_problems(regular_wheel, "regular", cuda=False) == []
    release = torch.__version__.split("+")[0]
    assert shipping.wheel_metadata(regular_wheel)["Requires-Dist"] == [f"torch=={release}"]
    assert shipping.wheel_metadata(stable_wheel)["Tag"] == ["cp39-abi3-linux_x86_64"]


def test_a_regular_wheel_fails_the_stable_promise(regular_wheel):
    # The regular build calls hundreds of C++ functions of c10/at/torch, each one a mangled name
    # that another torch release may not export.
    assert len(shipping.undefined_torch_cpp_symbols(regular_wheel)) > 50
    problems = "\n".join(shipping.wheel_problems(regular_wheel, "stable", cuda=False))
    assert "C++ functions of torch" in problems and "Requires-Dist" in problems and "abi3" in problems


def test_a_cpu_wheel_fails_the_cuda_promise(stable_wheel):
    # A CUDA build needs torch's CUDA libraries (the stable one: libtorch_cuda, for the current
    # stream), so a CUDA torch: the stable ABI spans torch releases, not CPU and CUDA variants.
    if torch.version.cuda is None:
        pytest.skip("a CPU-only torch: no CUDA version label to expect")
    problems = "\n".join(shipping.wheel_problems(stable_wheel, "stable", cuda=True))
    assert "links no CUDA library" in problems and f"+cu{torch.version.cuda.replace('.', '')}" in problems


def test_a_wheel_with_debug_information_fails(stable_wheel, tmp_path):
    # Python's own CFLAGS include -g; the build turns it off (MYLINEAROPS_DEBUG_INFO=0). Rebuild
    # the library's bytes with a .debug_info section by objcopy, and the check must notice.
    library = next(shipping.unpacked(stable_wheel).glob("mylinearops/_C*.so"))
    note = tmp_path / "note"
    note.write_bytes(b"\0" * 16)
    with_debug = tmp_path / library.name
    subprocess.run(["objcopy", "--add-section", f".debug_info={note}", str(library), str(with_debug)], check=True)
    wheel = tmp_path / stable_wheel.name
    with zipfile.ZipFile(stable_wheel) as source, zipfile.ZipFile(wheel, "w") as target:
        for item in source.infolist():
            data = with_debug.read_bytes() if item.filename.endswith(library.name) else source.read(item)
            target.writestr(item, data)
    assert shipping.wheel_problems(wheel, "stable", cuda=False) == ["its library carries debug information"]


@pytest.mark.slow
def test_a_rebuilt_wheel_is_unpacked_afresh(tmp_path, monkeypatch):
    # A wheel rebuilt from changed sources has the same file name; its unpacked copy must not be the old one.
    monkeypatch.setattr(shipping, "BUILD_DIR", tmp_path / "build")
    contents = {}
    for version in ("old", "new"):
        wheel = tmp_path / version / "pkg-0.1.0-py3-none-any.whl"
        wheel.parent.mkdir()
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("pkg/source.txt", version)
        contents[version] = (shipping.unpacked(wheel) / "pkg" / "source.txt").read_text()
    assert contents == {"old": "old", "new": "new"}
