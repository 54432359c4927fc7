"""Shipping mylinearops: its two wheels, and a second environment with another torch release.

The chapters on building and shipping the extension load a build into a torch it was not
compiled against. This module provides what they need, built on first use and cached under
``_build/``:

- ``other_torch_python()``: the Python of a virtual environment with a different torch release
  (``OTHER_TORCH``, override with ``BOOK_OTHER_TORCH``) and the extension's test requirements;
  it raises ``OtherTorchUnavailable`` where that environment cannot be made (on Colab, say), and
  ``other_torch_python_or_none()`` returns None there instead;
- ``regular_library()``: the regular-ABI build's ``_C*.so`` (CPU only), for the pinned torch;
- ``build_wheel(abi, cuda)``: a wheel of the extension (regular or stable ABI), cached by the
  hash of its sources, the torch it is built against and the switches; a wheel that breaks
  what its ABI and kernels promise (``wheel_problems``) is an error, not a cache entry;
- ``run_extension_tests(python, wheel)``: the extension's test suite, run by ``python`` against
  that wheel (installed into a directory of its own, so environments are never modified).

Command line (used by the Makefile):
    python -m booktools.shipping env                       create the environment, print its Python
    python -m booktools.shipping wheel --abi stable --cuda 0 [--dest dist]
    python -m booktools.shipping test-other-torch          the stable wheel's tests under OTHER_TORCH
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from filelock import FileLock
from packaging.requirements import Requirement

from .colab import pinned_requirements
from .paths import EXT_DIR, REPO_ROOT, REQUIREMENTS_FILE

# A torch release other than the pinned one, still >= 2.10 (the stable ABI's floor). These
# machines' pip finds a local CPU-only wheel of it (no CUDA libraries to download).
OTHER_TORCH = os.environ.get("BOOK_OTHER_TORCH", "2.13.0+cpu")
BUILD_DIR = REPO_ROOT / "_build"
DIST_DIR = REPO_ROOT / "dist"
WHEEL_CACHE = BUILD_DIR / "wheels"
# What the extension's tests import besides torch and mylinearops.
TEST_REQUIREMENTS = ("pytest", "numpy")


def _version_slug(version: str) -> str:
    return version.replace("+", "-")


def other_torch_dir() -> Path:
    return BUILD_DIR / f"venv-torch-{_version_slug(OTHER_TORCH)}"


def _lock(name: str) -> FileLock:
    """One process at a time builds a given thing (a notebook and a test may race)."""
    BUILD_DIR.mkdir(exist_ok=True)
    return FileLock(BUILD_DIR / f".{name}.lock")


def _pinned(name: str) -> str:
    """``name==version`` as requirements.txt pins it (the same pytest, numpy as the book's)."""
    pins = {key.lower(): version for key, version in pinned_requirements(REQUIREMENTS_FILE).items()}
    return f"{name}=={pins[name.lower()]}" if name.lower() in pins else name


class OtherTorchUnavailable(RuntimeError):
    """The environment with torch ``OTHER_TORCH`` cannot be made on this machine."""


# Why the environment could not be made, once this process has tried: pip is not asked again.
_unavailable: str | None = None


def other_torch_python() -> Path:
    """The Python of a venv with torch ``OTHER_TORCH`` (created on first use, about a minute).
    Raises OtherTorchUnavailable where it cannot be made: the default release is a CPU-only
    wheel that these machines' pip finds locally, for their Python only."""
    global _unavailable
    if _unavailable is not None:
        raise OtherTorchUnavailable(_unavailable)
    venv = other_torch_dir()
    python = venv / "bin" / "python"
    stamp = venv / ".complete"
    with _lock(venv.name):
        if stamp.exists():
            return python
        made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            _unavailable = f"could not create a virtual environment at {venv}:\n{made.stderr[-2000:]}"
            raise OtherTorchUnavailable(_unavailable)
        requirements = [f"torch=={OTHER_TORCH}", *(_pinned(name) for name in TEST_REQUIREMENTS)]
        result = subprocess.run(
            # Byte-compiled at install (pip's default), as make setup does for .venv.
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *requirements],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            _unavailable = (
                f"could not install torch=={OTHER_TORCH} into {venv} (set BOOK_OTHER_TORCH to "
                f"another release >= 2.10 that pip can find here):\n{result.stderr[-2000:]}"
            )
            raise OtherTorchUnavailable(_unavailable)
        stamp.write_text(OTHER_TORCH + "\n")
    return python


def other_torch_python_or_none() -> Path | None:
    """other_torch_python(), or None where that environment cannot be made."""
    try:
        return other_torch_python()
    except OtherTorchUnavailable:
        return None


def regular_library() -> Path:
    """The compiled library of the regular-ABI CPU wheel, built against the pinned torch.
    (CPU only: a CUDA build would first fail for want of libc10_cuda.so under a CPU torch.)"""
    return _library_in(build_wheel("regular", cuda=False))


def _sources_digest() -> str:
    """A hash of everything that goes into a build of ext/."""
    digest = hashlib.sha256()
    files = [EXT_DIR / "setup.py", EXT_DIR / "pyproject.toml"]
    files += sorted(p for p in (EXT_DIR / "csrc").rglob("*") if p.is_file())
    files += sorted((EXT_DIR / "mylinearops").glob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(EXT_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build_wheel(abi: str, cuda: bool = False, dest: Path | None = None) -> Path:
    """A wheel of ext/ with the ``abi`` front end ("regular" or "stable"), CUDA kernels or not,
    built against the torch of this Python. Cached: rebuilt only when the sources change.
    The build time (seconds) is written beside it, in ``<wheel>.build-seconds``."""
    import torch

    if abi not in ("regular", "stable"):
        raise ValueError(f"abi must be 'regular' or 'stable', got {abi!r}")
    key = f"{abi}-{'cuda' if cuda else 'cpu'}-torch{torch.__version__}-{_sources_digest()}"
    out_dir = WHEEL_CACHE / key
    with _lock("wheel-" + abi):
        found = sorted(out_dir.glob("*.whl"))
        if not found:
            shutil.rmtree(out_dir, ignore_errors=True)
            with tempfile.TemporaryDirectory(dir=BUILD_DIR) as tmp:
                # A copy of ext/: builds of different ABIs must not share ext/build/.
                source = Path(tmp) / "ext"
                shutil.copytree(EXT_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "*.so", ".jit-build", "__pycache__", "bench", "tests"))
                env = {**os.environ, "MYLINEAROPS_ABI": abi, "MYLINEAROPS_CUDA": "1" if cuda else "0",
                       "MYLINEAROPS_DEBUG_INFO": "0"}  # a wheel to distribute carries no debug information
                start = time.perf_counter()
                result = subprocess.run(
                    [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                     "--disable-pip-version-check", "--wheel-dir", str(Path(tmp) / "dist"), str(source)],
                    capture_output=True, text=True, env=env,
                )
                seconds = time.perf_counter() - start
                if result.returncode != 0:
                    raise RuntimeError(f"building the {abi} wheel failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
                for wheel in (Path(tmp) / "dist").glob("*.whl"):
                    problems = wheel_problems(wheel, abi, cuda)
                    if problems:
                        raise RuntimeError(f"the {abi} wheel {wheel.name} breaks its contract:\n- " + "\n- ".join(problems))
                out_dir.mkdir(parents=True)
                for wheel in (Path(tmp) / "dist").glob("*.whl"):
                    shutil.copy2(wheel, out_dir / wheel.name)
                    (out_dir / (wheel.name + ".build-seconds")).write_text(f"{seconds:.1f}\n")
            found = sorted(out_dir.glob("*.whl"))
    (wheel,) = found
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, dest / wheel.name)
        return dest / wheel.name
    return wheel


def _build_config():
    """ext's build configuration, loaded by path (importing mylinearops would load its library)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_mylinearops_build_config", EXT_DIR / "mylinearops" / "_build_config.py")
    config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config)
    return config


def cuda_buildable() -> bool:
    """What MYLINEAROPS_CUDA=auto decides here: a CUDA torch and a CUDA toolkit."""
    import torch

    return torch.version.cuda is not None and _build_config().find_cuda_home() is not None


# Mangled names of C++ functions in torch's namespaces: c10::, at::, torch:: (also const
# methods, _ZNK). The stable ABI's functions are extern "C" (aoti_torch_*, torch_*).
TORCH_CPP_SYMBOL = re.compile(r"^_ZN?K?(3c10|2at|5torch)")
# What a build with CUDA kernels links (name prefixes: libcudart.so.13, ...), and a CPU build must not.
CUDA_LIBRARIES = ("libtorch_cuda.so", "libc10_cuda.so", "libcudart.so")


def wheel_metadata(wheel: Path) -> dict[str, list[str]]:
    """The fields pip reads to choose a wheel: tags, version, requirements."""
    fields: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith((".dist-info/METADATA", ".dist-info/WHEEL")):
                for line in archive.read(member).decode().splitlines():
                    key, sep, value = line.partition(": ")
                    if sep and key in ("Tag", "Requires-Dist", "Version", "Requires-Python"):
                        fields.setdefault(key, []).append(value)
    return fields


def _library_in(wheel: Path) -> Path:
    (library,) = unpacked(wheel).glob("mylinearops/_C*.so")
    return library


def undefined_torch_cpp_symbols(wheel: Path) -> list[str]:
    """The C++ functions of torch the wheel's library needs: the names that tie it to one release."""
    out = subprocess.run(["nm", "-D", "--undefined-only", str(_library_in(wheel))], capture_output=True, text=True, check=True)
    return [name for name in (line.split()[-1] for line in out.stdout.splitlines()) if TORCH_CPP_SYMBOL.match(name)]


def needed_libraries(wheel: Path) -> set[str]:
    """The shared libraries the dynamic loader must find for the wheel's library (DT_NEEDED)."""
    dynamic = subprocess.run(["readelf", "-d", str(_library_in(wheel))], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))


def wheel_problems(wheel: Path, abi: str, cuda: bool) -> list[str]:
    """How a wheel of ext/ breaks what its build promises (empty: none), against the torch of
    this Python: the stable wheel calls torch only through its C shim and asks pip for any torch
    from the stable target on, on any CPython 3 (abi3); the regular one asks for exactly this
    torch; the version's local label names the build (+cpu, +cu130, +torch2.14.1.cpu); a CUDA
    build links at least one CUDA library (CUDA_LIBRARIES), a CPU build none; no debug
    information."""
    import torch

    if cuda and torch.version.cuda is None:
        raise ValueError("a CUDA wheel is checked against a CUDA build of torch; this torch is CPU-only")
    release = torch.__version__.split("+")[0]
    accelerator = "cu" + torch.version.cuda.replace(".", "") if cuda else "cpu"
    metadata = wheel_metadata(wheel)
    # Older setuptools write "torch ==2.11.0" (Colab's runtime): compare requirements, not text.
    requires = [f"{r.name}{r.specifier}" for r in map(Requirement, metadata.get("Requires-Dist", []))]
    tags = metadata.get("Tag", [])
    if abi == "stable":
        label, wanted = accelerator, ["torch>={}.{}".format(*_build_config().STABLE_TORCH_TARGET)]
        tag_ok = bool(tags) and all("-abi3-" in tag for tag in tags)
    else:
        label, wanted = f"torch{release}.{accelerator}", [f"torch=={release}"]
        tag_ok = bool(tags) and all(tag.startswith("cp3") and "abi3" not in tag for tag in tags)
    problems = []
    if requires != wanted:
        problems.append(f"Requires-Dist is {requires}, not {wanted}")
    version = (metadata.get("Version") or ["?"])[0]
    if version.partition("+")[2] != label:
        problems.append(f"Version {version} is not labelled +{label}")
    if not tag_ok:
        problems.append(f"Tag {tags} is not a{'n abi3' if abi == 'stable' else ' CPython-specific'} tag")
    if abi == "stable" and (names := undefined_torch_cpp_symbols(wheel)):
        problems.append(f"it calls {len(names)} C++ functions of torch (not the C shim), e.g. {names[0]}")
    cuda_linked = sorted(name for name in needed_libraries(wheel) if name.startswith(CUDA_LIBRARIES))
    if cuda and not cuda_linked:
        problems.append("a CUDA build that links no CUDA library (libtorch_cuda, libc10_cuda, libcudart)")
    if not cuda and cuda_linked:
        problems.append(f"a CPU build that links {cuda_linked}, which a CPU-only torch lacks")
    sections = subprocess.run(["readelf", "-S", "--wide", str(_library_in(wheel))], capture_output=True, text=True, check=True)
    if ".debug_info" in sections.stdout:  # Python's own CFLAGS, which setuptools passes on, include -g
        problems.append("its library carries debug information")
    return problems


def build_seconds(wheel: Path) -> float:
    return float((wheel.parent / (wheel.name + ".build-seconds")).read_text())


def unpacked(wheel: Path) -> Path:
    """The wheel's files in a directory of their own (what pip would install), for PYTHONPATH.
    Keyed by the wheel's contents, not its name: a rebuild from changed sources keeps the name."""
    target = BUILD_DIR / "unpacked" / f"{wheel.stem}-{hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]}"
    with _lock("unpack"):
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            shutil.unpack_archive(str(wheel), str(target), format="zip")
            (target / ".complete").write_text(wheel.name + "\n")
    return target


def run_extension_tests(python: Path, wheel: Path, *pytest_args: str, files: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """ext/tests (or only its test ``files``) run by ``python`` against ``wheel`` (not against
    the source tree)."""
    paths = [str(EXT_DIR / "tests" / name) for name in files] or [str(EXT_DIR / "tests")]
    with tempfile.TemporaryDirectory() as tmp:  # a working directory without ext/mylinearops
        return subprocess.run(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
             "--rootdir", str(EXT_DIR / "tests"), *paths, *pytest_args],
            capture_output=True, text=True, cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(unpacked(wheel)), "MYLINEAROPS_CUDA": "0"},
        )


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.shipping")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env", help="create the other-torch environment; print its Python")
    wheel = commands.add_parser("wheel", help="build a wheel of ext/")
    wheel.add_argument("--abi", choices=("regular", "stable"), required=True)
    wheel.add_argument("--cuda", choices=("0", "1", "auto"), default="auto")
    wheel.add_argument("--dest", type=Path, default=DIST_DIR)
    commands.add_parser("test-other-torch", help=f"run ext/tests with the stable CPU wheel under torch {OTHER_TORCH}")
    args = parser.parse_args(argv)
    if args.command == "env":
        print(other_torch_python())
    elif args.command == "wheel":
        cuda = cuda_buildable() if args.cuda == "auto" else args.cuda == "1"
        path = build_wheel(args.abi, cuda=cuda, dest=args.dest)
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        print(f"{shown}: {path.stat().st_size / 1e6:.2f} MB, built in {build_seconds(build_wheel(args.abi, cuda=cuda)):.0f} s")
    elif args.command == "test-other-torch":
        wheel_path = build_wheel("stable", cuda=False)
        python = other_torch_python()
        # test_build.py builds the source checkout (JIT, setup config), not the wheel.
        result = run_extension_tests(python, wheel_path, "--ignore", str(EXT_DIR / "tests" / "test_build.py"),
                                     "--durations=5")
        print(result.stdout[-12000:], result.stderr[-3000:], sep="\n")
        print(f"{wheel_path.name} under torch {OTHER_TORCH}: pytest exit status {result.returncode}")
        return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
