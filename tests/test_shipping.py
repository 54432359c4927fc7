"""The extension's two builds as distributed wheels (booktools.shipping; ext/README.md).

The stable-ABI wheel must call into libtorch only through its C shim (no C++ symbol of
torch) and carry the tags and requirements that let pip install it for any torch >= 2.10;
the regular wheel must say it needs exactly the torch it was built against. That the stable
wheel computes under another torch release, and that the regular one fails to load there with
an undefined symbol, the chapter "Shipping the extension" shows (`make test-other-torch` runs the
extension's whole suite there).
"""

from __future__ import annotations

import re
import subprocess
import zipfile

import pytest
import torch

from booktools import shipping

pytestmark = pytest.mark.slow

# Mangled names of C++ functions in torch's namespaces: c10::, at::, torch:: (also const
# methods, _ZNK). The stable ABI's functions are extern "C" (aoti_torch_*, torch_*).
TORCH_CPP_SYMBOL = re.compile(r"^_ZN?K?(3c10|2at|5torch)")


def undefined_torch_cpp_symbols(wheel) -> list[str]:
    (library,) = shipping.unpacked(wheel).glob("mylinearops/_C*.so")
    out = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True)
    names = [line.split()[-1] for line in out.stdout.splitlines()]
    return [name for name in names if TORCH_CPP_SYMBOL.match(name)]


def wheel_metadata(wheel) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith((".dist-info/METADATA", ".dist-info/WHEEL")):
                for line in archive.read(member).decode().splitlines():
                    key, sep, value = line.partition(": ")
                    if sep and key in ("Tag", "Requires-Dist", "Version", "Requires-Python"):
                        fields.setdefault(key, []).append(value)
    return fields


@pytest.fixture(scope="module")
def stable_wheel():
    return shipping.build_wheel("stable", cuda=False)


@pytest.fixture(scope="module")
def regular_wheel():
    return shipping.build_wheel("regular", cuda=False)


def test_stable_library_calls_torch_only_through_the_c_shim(stable_wheel, regular_wheel):
    assert undefined_torch_cpp_symbols(stable_wheel) == []
    # ... where the regular build calls hundreds of C++ functions of c10/at/torch.
    assert len(undefined_torch_cpp_symbols(regular_wheel)) > 50


def test_wheels_carry_no_debug_information(stable_wheel, regular_wheel):
    # Python's own CFLAGS, which setuptools passes to every extension, include -g.
    for wheel in (stable_wheel, regular_wheel):
        (library,) = shipping.unpacked(wheel).glob("mylinearops/_C*.so")
        sections = subprocess.run(["readelf", "-S", "--wide", str(library)], capture_output=True, text=True, check=True)
        assert ".debug_info" not in sections.stdout, wheel.name


def test_wheel_metadata_tells_pip_what_each_build_needs(stable_wheel, regular_wheel):
    stable, regular = wheel_metadata(stable_wheel), wheel_metadata(regular_wheel)
    assert stable["Tag"] == ["cp39-abi3-linux_x86_64"]
    assert stable["Requires-Dist"] == ["torch>=2.10"]
    assert stable["Version"] == ["0.1.0+cpu"]
    release = torch.__version__.split("+")[0]
    assert regular["Requires-Dist"] == [f"torch=={release}"]
    assert regular["Version"] == [f"0.1.0+torch{release}.cpu"]
    assert regular["Tag"][0].startswith("cp3") and "abi3" not in regular["Tag"][0]


@pytest.mark.skipif(not shipping.cuda_buildable(), reason="no CUDA toolkit or CPU-only torch: no CUDA wheel to build")
def test_cuda_stable_wheel_needs_a_cuda_torch():
    # The stable ABI spans torch releases, not CPU and CUDA variants: a CUDA build links
    # libtorch_cuda (for the current stream), which a CPU-only torch does not have.
    wheel = shipping.build_wheel("stable", cuda=True)
    (library,) = shipping.unpacked(wheel).glob("mylinearops/_C*.so")
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert {"libtorch_cuda.so", "libtorch_cpu.so"} <= needed
    assert wheel_metadata(wheel)["Version"] == ["0.1.0+cu" + torch.version.cuda.replace(".", "")]
    assert undefined_torch_cpp_symbols(wheel) == []


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
