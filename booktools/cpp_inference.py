"""Build and run the C++ inference program in cpp/inference/ (chapter "From data to deployment").

`build_cpp_inference()` configures and builds it with CMake against the libtorch inside the
installed torch wheel, in a persistent, git-ignored build folder (cpp/inference/build/): the
first build compiles main.cpp (about half a minute on two cores), later calls only check that
nothing changed. The notebook and tests/test_cpp_inference.py both use it, so the program is
built one way only. `run_cpp_inference()` runs it and returns its predictions and logits.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from booktools.paths import REPO_ROOT

CPP_DIR = REPO_ROOT / "cpp" / "inference"
DEFAULT_BUILD_DIR = CPP_DIR / "build"
EXECUTABLE_NAME = "classify"
MIN_CMAKE = (3, 18)

INSTALL_HINT = (
    "Install them, e.g. `sudo apt-get install cmake g++` on Debian/Ubuntu, "
    "`xcode-select --install` and `brew install cmake` on macOS, or `pip install cmake` for CMake alone."
)


class ToolchainMissing(RuntimeError):
    """CMake or a C++ compiler is not installed."""


@dataclass
class Build:
    executable: Path
    seconds: float  # wall time of this call: configure (if needed) and build
    configured: bool  # whether CMake had to (re)configure the build folder
    link_mode: str  # PACKAGE (find_package(Torch)) or CPU (libtorch_cpu only); see CMakeLists.txt
    fallback_reason: str | None = None  # why find_package(Torch) was given up for the CPU link mode


@dataclass
class Run:
    stdout: str
    predictions: np.ndarray  # int64 [N]: the predicted class of each image
    logits: np.ndarray  # float32 [N, classes]: exactly the values the program computed


def _cxx_compiler() -> str | None:
    if os.environ.get("CXX"):
        return shutil.which(os.environ["CXX"])
    return next((found for name in ("c++", "g++", "clang++") if (found := shutil.which(name))), None)


def check_toolchain() -> None:
    """Raise ToolchainMissing, naming what to install, unless cmake and a C++ compiler exist."""
    missing = []
    cmake = shutil.which("cmake")
    if cmake is None:
        missing.append(f"CMake >= {'.'.join(map(str, MIN_CMAKE))}")
    else:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"version (\d+)\.(\d+)", out)
        if found and tuple(map(int, found.groups())) < MIN_CMAKE:
            missing.append(f"CMake >= {'.'.join(map(str, MIN_CMAKE))} (found {found[1]}.{found[2]})")
    if _cxx_compiler() is None:
        missing.append("a C++20 compiler such as g++ (10 or newer) or clang++ (set CXX to choose one)")
    if missing:
        raise ToolchainMissing(f"the C++ inference program needs {' and '.join(missing)}. {INSTALL_HINT}")


def configure_command(build_dir: Path, cmake_args: tuple[str, ...] = ()) -> list[str]:
    """The CMake configure command: the torch wheel's CMake package folder is the one input."""
    import torch.utils

    return [
        "cmake", "-S", str(CPP_DIR), "-B", str(build_dir),
        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        "-DCMAKE_BUILD_TYPE=Release",
        *cmake_args,
    ]


def _cached(build_dir: Path, name: str) -> str | None:
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    found = re.search(rf"^{name}:[A-Z]+=(.*)$", cache.read_text(encoding="utf-8", errors="replace"), re.M)
    return found[1] if found else None


@contextmanager
def _locked(build_dir: Path):
    """One build at a time in a folder (a test and a notebook may build concurrently)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    with open(build_dir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[str], what: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        tail = "\n".join(output.splitlines()[-40:])
        raise RuntimeError(f"{what} failed (exit code {result.returncode}): {' '.join(command)}\n{tail}")
    return output


def _forget_configuration(build_dir: Path) -> None:
    for stale in (build_dir / "CMakeCache.txt", build_dir / "CMakeFiles"):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()


def build_cpp_inference(
    build_dir: Path | str = DEFAULT_BUILD_DIR, *, cmake_args: tuple[str, ...] = (), jobs: int | None = None
) -> Build:
    """Configure (if needed) and build cpp/inference in `build_dir`; return the result.

    cmake_args: extra configure options, e.g. ("-DCLASSIFY_TORCH_LINK=CPU",). Without an explicit
    CLASSIFY_TORCH_LINK, a failed find_package(Torch) configuration (typically a CUDA toolkit that
    does not fit the torch build) is retried with the CPU link mode; Build.fallback_reason says why.
    """
    check_toolchain()
    build_dir = Path(build_dir)
    command = configure_command(build_dir, tuple(cmake_args))
    record = build_dir / ".configure-command"  # the command asked for, to notice when it changes
    start = time.perf_counter()
    fallback_reason = None
    with _locked(build_dir):
        configured = not record.is_file() or record.read_text(encoding="utf-8") != "\n".join(command)
        if configured:  # first build, or another torch or other options: configure afresh
            record.unlink(missing_ok=True)
            _forget_configuration(build_dir)
            try:
                _run(command, "configuring the C++ inference program with CMake")
            except RuntimeError as error:
                if any(arg.startswith("-DCLASSIFY_TORCH_LINK=") for arg in cmake_args):
                    raise
                fallback_reason = str(error)
                _forget_configuration(build_dir)
                _run(command + ["-DCLASSIFY_TORCH_LINK=CPU"], "configuring the C++ inference program (CPU link mode)")
            record.write_text("\n".join(command), encoding="utf-8")
        jobs = jobs or os.cpu_count() or 1
        _run(["cmake", "--build", str(build_dir), "--parallel", str(jobs)], "building the C++ inference program")
    executable = build_dir / EXECUTABLE_NAME
    if not executable.is_file():
        raise RuntimeError(f"the build finished but {executable} does not exist")
    link_mode = _cached(build_dir, "CLASSIFY_LINK_MODE") or "?"
    return Build(executable, time.perf_counter() - start, configured, link_mode, fallback_reason)


def run_cpp_inference(
    executable: Path | str,
    model: Path | str,
    images: Path | str,
    labels: Path | str | None = None,
    *,
    threads: int | None = None,
    batch_size: int = 1000,
    show: int = 5,
) -> Run:
    """Run the program on an IDX image file; return its output, predictions and logits."""
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "predictions.csv"
        command = [str(executable), str(model), str(images)] + ([str(labels)] if labels else [])
        command += ["--batch-size", str(batch_size), "--show", str(show), "--output", str(output)]
        if threads:
            command += ["--threads", str(threads)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(executable).name} failed (exit code {result.returncode}): {result.stderr.strip()}")
        table = np.loadtxt(output, delimiter=",", dtype=np.float64, ndmin=2)
    # The program prints 9 significant digits, enough to give back every float32 exactly.
    return Run(result.stdout, table[:, 0].astype(np.int64), table[:, 1:].astype(np.float32))
