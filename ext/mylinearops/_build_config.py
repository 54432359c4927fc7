"""How mylinearops is compiled: sources, flags, and whether CUDA is built.

Shared by ``setup.py`` (the packaged build) and ``jit.py`` (the JIT build) so
the two cannot drift apart. It imports nothing from the package, so setup.py
can load it by file path before the package exists.

Environment switches (read at build time):

``MYLINEAROPS_ABI``         ``regular`` (default): the ATen C++ API, a binary for exactly
                            the torch it was built against; ``stable``: the LibTorch
                            stable ABI and Python's limited API, one binary for every
                            torch >= 2.10 and CPython >= 3.9 (``STABLE_TORCH_TARGET``).
``MYLINEAROPS_CUDA``        ``auto`` (default): build the CUDA kernels when torch
                            is a CUDA build and a CUDA toolkit (nvcc) is found;
                            ``1``: require them (error if impossible); ``0``: CPU only.
``TORCH_CUDA_ARCH_LIST``    GPU architectures to compile for. Unset and no GPU
                            visible: ``DEFAULT_CUDA_ARCH_LIST`` (below).
``MAX_JOBS``                parallel compile jobs (torch's default: all cores).
``CXX``                     the C++ compiler (default ``c++``).
``MYLINEAROPS_AVX512_VIA_SIMDE``  ``1``: a test build whose AVX-512 micro-kernels run on any
                            CPU, their intrinsics implemented in portable code by SIMDe
                            (Debian: libsimde-dev); ``make test-avx512-emulated``. Never
                            for use: the emulated kernels are many times slower.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXT_DIR = Path(__file__).resolve().parent.parent  # ext/ in a source checkout

# The operator layer and the kernels: compiled into both builds.
SHARED_CPU_SOURCES = [
    "csrc/operator.cpp",
    "csrc/cpu/matmul_cpu.cpp",
    "csrc/cpu/cpu_features.cpp",
    "csrc/cpu/tuning.cpp",
    "csrc/cpu/microkernel_avx512.cpp",
    "csrc/cpu/microkernel_avx2.cpp",
    "csrc/cpu/microkernel_generic.cpp",
]
# The front ends: at::Tensor + TORCH_LIBRARY + C++ autograd, or the stable ABI.
FRONT_END_SOURCES = {
    "regular": ["csrc/mylinearops.cpp", "csrc/autograd.cpp"],
    "stable": ["csrc/stable/mylinearops_stable.cpp"],
}
CPU_SOURCES = FRONT_END_SOURCES["regular"] + SHARED_CPU_SOURCES  # the regular build's
CUDA_SOURCES = [
    "csrc/cuda/matmul_cuda.cu",
    "csrc/cuda/matmul_register_blocked.cu",
    "csrc/cuda/fma_loop.cu",
]
# Only the packaged build: defines PyInit__C so ``import mylinearops._C`` works.
PYTHON_MODULE_SOURCE = "csrc/python_module.cpp"
HEADERS = [
    "csrc/mylinearops.h",
    "csrc/operator.h",
    "csrc/runtime.h",
    "csrc/cpu/microkernel.h",
    "csrc/cpu/cpu_features.h",
    "csrc/cpu/tuning.h",
    "csrc/cpu/microkernel_impl.h",
    "csrc/cuda/matmul_kernels.cuh",
]

# sm_90 (H100/H200) as SASS, plus PTX so newer GPUs (Blackwell) can JIT it.
# Every extra architecture adds roughly the same compile time again.
DEFAULT_CUDA_ARCH_LIST = "9.0+PTX"

CUDA_MODES = ("auto", "0", "1")
ABIS = ("regular", "stable")
# The oldest torch the stable build may call into: TORCH_TARGET_VERSION hides every
# newer stable-ABI function at compile time, so the binary loads into torch >= 2.10.
STABLE_TORCH_TARGET = (2, 10)
# The oldest CPython whose limited API the stable build's module uses (extension-cpp's too).
STABLE_PYTHON_TARGET = (3, 9)


def abi() -> str:
    value = os.environ.get("MYLINEAROPS_ABI", "regular").strip().lower() or "regular"
    if value not in ABIS:
        raise ValueError(
            f"MYLINEAROPS_ABI={value!r} is not one of {', '.join(ABIS)} (regular: the ATen C++ API, "
            "for the torch it is built against; stable: the LibTorch stable ABI, for any torch >= 2.10)"
        )
    return value


def abi_flags(abi_name: str) -> list[str]:
    """Preprocessor flags that select the front end and the runtime (csrc/runtime.h)."""
    if abi_name == "regular":
        return []
    major, minor = STABLE_TORCH_TARGET
    py_major, py_minor = STABLE_PYTHON_TARGET
    return [
        "-DMYLINEAROPS_STABLE_ABI",
        f"-DTORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000",
        f"-DPy_LIMITED_API=0x{py_major:02x}{py_minor:02x}0000",
    ]


def cuda_mode() -> str:
    mode = os.environ.get("MYLINEAROPS_CUDA", "auto").strip().lower() or "auto"
    if mode not in CUDA_MODES:
        raise ValueError(
            f"MYLINEAROPS_CUDA={mode!r} is not one of {', '.join(CUDA_MODES)} "
            "(auto: build CUDA kernels if nvcc is found; 1: require them; 0: CPU only)"
        )
    return mode


def find_cuda_home() -> str | None:
    """The CUDA toolkit root (with bin/nvcc and include/), or None.

    torch guesses the root as the parent of ``which nvcc``. Where nvcc on PATH
    is a wrapper script (e.g. /usr/local/bin/nvcc exec-ing the real one) that
    guess (/usr/local) has no headers, so also try the conventional
    /usr/local/cuda. CUDA_HOME / CUDA_PATH, when set, win.
    """
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for root in candidates:
        if (root / "bin" / "nvcc").exists() and (root / "include" / "cuda_runtime_api.h").exists():
            return str(root)
    return None


def import_cpp_extension():
    """torch.utils.cpp_extension, without its import-time warning that no
    CUDA runtime (GPU) is found: expected, and harmless, on GPU-less builds."""
    import logging

    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    return cpp_extension


def use_cuda_home(root: str) -> None:
    """Make torch.utils.cpp_extension compile against ``root``."""
    import sys

    os.environ["CUDA_HOME"] = root
    cpp_extension = sys.modules.get("torch.utils.cpp_extension")
    if cpp_extension is not None:  # imported already: it read CUDA_HOME at import time
        cpp_extension.CUDA_HOME = root


def want_cuda() -> bool:
    """Decide whether to compile the CUDA kernels (see MYLINEAROPS_CUDA)."""
    import torch

    mode = cuda_mode()
    if mode == "0":
        return False
    toolkit = find_cuda_home()
    possible = torch.version.cuda is not None and toolkit is not None
    if mode == "1" and not possible:
        if torch.version.cuda is None:
            why = f"torch {torch.__version__} is a CPU-only build"
            fix = "Install a CUDA build of torch (and a CUDA toolkit of the same major version)"
        else:
            why = "no CUDA toolkit was found (no nvcc on PATH, CUDA_HOME unset)"
            fix = f"Install the CUDA toolkit matching torch.version.cuda={torch.version.cuda} (and set CUDA_HOME)"
        raise RuntimeError(f"MYLINEAROPS_CUDA=1 but {why}. {fix}, or build the CPU-only library with MYLINEAROPS_CUDA=0.")
    if possible:
        use_cuda_home(toolkit)
    return possible


def set_default_cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST for this build; sets the default where none is set.

    torch derives the list from the visible GPUs and fails when there are
    none, so a GPU-less build (CI, these notes' build machines) needs one.
    """
    import torch

    archs = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if archs:
        return archs
    if torch.cuda.is_available():
        return "(visible GPUs)"
    os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCH_LIST
    return DEFAULT_CUDA_ARCH_LIST


def check_toolchain(need_ninja: bool = True) -> None:
    """Fail early, naming what to install, rather than deep inside the build."""
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        raise RuntimeError(
            f"mylinearops: no C++ compiler found (looked for {cxx!r}; set CXX to use another). "
            "Install one, e.g. `apt-get install g++` on Debian/Ubuntu, "
            "`dnf install gcc-c++` on Fedora, or Xcode's command line tools on macOS."
        )
    if need_ninja:
        if not import_cpp_extension().is_ninja_available():
            raise RuntimeError(
                "mylinearops: building needs the ninja build tool, which was not found. "
                "Install it with `pip install ninja` (it is in the book's requirements.txt)."
            )


@functools.lru_cache(maxsize=None)
def openmp_flags() -> tuple[str, ...]:
    """("-fopenmp",) if the C++ compiler (CXX, as torch's build uses it) compiles and links an
    OpenMP program; else () and a warning: the CPU kernels then run on one thread."""
    cxx = os.environ.get("CXX", "c++")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
        probe = subprocess.run([cxx, "-fopenmp", str(source), "-o", str(Path(tmp) / "probe")],
                               capture_output=True, text=True)
    if probe.returncode == 0:
        return ("-fopenmp",)
    print(f"mylinearops: {cxx} cannot build OpenMP code (for Clang: apt-get install libomp-dev); "
          "the CPU kernels will run on one thread", file=sys.stderr)
    return ()


def avx512_via_simde() -> bool:
    value = os.environ.get("MYLINEAROPS_AVX512_VIA_SIMDE", "0").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"MYLINEAROPS_AVX512_VIA_SIMDE={value!r} is not 0 or 1")
    return value == "1"


def simde_available() -> bool:
    """Whether the C++ compiler (CXX) finds SIMDe's AVX-512 header."""
    cxx = os.environ.get("CXX", "c++")
    probe = subprocess.run([cxx, "-x", "c++", "-std=c++17", "-fsyntax-only", "-"],
                           input="#include <simde/x86/avx512.h>\n", capture_output=True, text=True)
    return probe.returncode == 0


def simde_flags() -> list[str]:
    """The define that turns microkernel_avx512.cpp into its SIMDe-emulated test build,
    after checking that the compiler finds SIMDe's headers."""
    if not avx512_via_simde():
        return []
    if not simde_available():
        cxx = os.environ.get("CXX", "c++")
        raise RuntimeError(
            f"mylinearops: MYLINEAROPS_AVX512_VIA_SIMDE=1 needs SIMDe's headers, which {cxx} does not find "
            "(simde/x86/avx512.h). Install them with `apt-get install libsimde-dev` on Debian/Ubuntu, "
            "or put a SIMDe checkout on CPATH."
        )
    # -Wno-psabi: GCC notes, for each of SIMDe's 64-byte vector types, an ABI change of GCC 4.6
    return ["-DMYLINEAROPS_AVX512_VIA_SIMDE", "-Wno-psabi"]


def debug_info() -> bool:
    """MYLINEAROPS_DEBUG_INFO=1: compile the C++ with debug information, for a debugger or a
    profiler's source lines; 0 (default): without."""
    value = os.environ.get("MYLINEAROPS_DEBUG_INFO", "0").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"MYLINEAROPS_DEBUG_INFO={value!r} is not 0 or 1")
    return value == "1"


def cxx_flags(with_cuda: bool, abi_name: str = "regular") -> list[str]:
    # OpenMP: our driver's thread team and at::parallel_for (a header template)
    # both need it; compiled without it they silently run on one thread. No
    # -march=native: the AVX2 and AVX-512 micro-kernels are compiled per file
    # and chosen at run time. -g0: setuptools compiles an extension with the
    # flags Python itself was built with, -g among them; the debug information
    # of torch's headers makes the library many times larger and its compile
    # slower. simde_flags(): only in the test build that emulates the AVX-512
    # kernels on any CPU (MYLINEAROPS_AVX512_VIA_SIMDE=1).
    flags = ["-O3", "-g" if debug_info() else "-g0", *openmp_flags(), *abi_flags(abi_name), *simde_flags()]
    if with_cuda:
        flags.append("-DMYLINEAROPS_WITH_CUDA")
    return flags


def nvcc_flags(abi_name: str = "regular") -> list[str]:
    # USE_CUDA: the stable ABI's CUDA shim functions (current stream, launch checks) are
    # declared only under it.
    stable = [*abi_flags(abi_name), "-DUSE_CUDA"] if abi_name == "stable" else []
    return ["-O3", "-lineinfo", "-DMYLINEAROPS_WITH_CUDA", *stable]


def link_flags() -> list[str]:
    return list(openmp_flags())


def sources(with_cuda: bool, root: Path = EXT_DIR, python_module: bool = False, abi_name: str = "regular") -> list[str]:
    files = FRONT_END_SOURCES[abi_name] + SHARED_CPU_SOURCES
    if with_cuda:
        files += CUDA_SOURCES
    if python_module:
        files.append(PYTHON_MODULE_SOURCE)
    return [str(root / f) for f in files]


# Functions of libstdc++'s own (not templates a header instantiates): a library that defines
# them carries a static copy of the C++ runtime. That copy's iostreams are never set up when
# another libstdc++ (the process's) already runs, so the first `out << 42` crashes (seen on an
# Ubuntu 24.04 GPU machine with GCC 13, CUDA 13 and torch 2.11: segfault in build_info()).
_CXX_RUNTIME_MARKERS = ("_ZNSo9_M_insert", "codecvt_utf8", "_ZNSt6locale")


def copied_cxx_runtime(library: str | Path) -> list[str]:
    """The libstdc++ functions that `library` defines itself ([] where it links the shared
    libstdc++, or where binutils' nm is missing to tell)."""
    nm = shutil.which("nm")
    if nm is None:
        return []
    out = subprocess.run([nm, "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "TtDdRrBb" and any(m in fields[2] for m in _CXX_RUNTIME_MARKERS):
            found.add(fields[2])
    return sorted(found)


def static_only_cxx_runtime(linker: str) -> str | None:
    """The libstdc++.a that `linker` (a GCC-style driver) would link, where it finds no
    libstdc++.so: then every library it links carries a copy of the C++ runtime. None where
    it finds the shared one, or cannot say."""

    def found(name: str) -> str | None:
        try:
            out = subprocess.run([linker, f"-print-file-name={name}"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        path = out.stdout.strip()  # the bare name where the driver has no such file
        return path if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None

    return None if found("libstdc++.so") else found("libstdc++.a")


def check_linker(linker: str | None = None) -> None:
    """Refuse, before compiling, a linker that would copy a static libstdc++ into the library.
    Default: the compiler torch.utils.cpp_extension.load links with ($CXX, else c++)."""
    linker = linker or os.environ.get("CXX", "c++").split()[0]
    static = static_only_cxx_runtime(linker)
    if static:
        named_by = (
            "the CXX environment variable"
            if os.environ.get("CXX", "").split()[:1] == [linker]
            else "the compiler Python was built with, or CC/CXX"
        )
        raise RuntimeError(
            f"mylinearops: the linker {linker} (from {named_by}) finds only a static C++ runtime, "
            f"{static}, and no libstdc++.so, so the extension "
            "would carry its own copy and crash at its first formatted output. Build with a compiler "
            "that finds the shared one, e.g. CC=gcc CXX=g++ (check with: g++ -print-file-name=libstdc++.so)."
        )


def check_cxx_runtime(library: str | Path) -> None:
    """Refuse a build that carries its own copy of libstdc++ (see _CXX_RUNTIME_MARKERS)."""
    copied = copied_cxx_runtime(library)
    if copied:
        raise RuntimeError(
            f"mylinearops: {library} contains its own copy of the C++ runtime ({len(copied)} libstdc++ "
            f"functions, e.g. {copied[0]}) instead of linking libstdc++.so.6, and would crash at its first "
            "formatted output. The link line pulled in a static libstdc++ (look for libstdc++.a or "
            "-static-libstdc++ in the build log, run without -q)."
        )

