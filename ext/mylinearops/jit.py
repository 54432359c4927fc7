"""Build mylinearops from its C++/CUDA sources at run time (for notebooks).

``import mylinearops`` normally loads the compiled ``mylinearops._C`` that
``pip install --no-build-isolation ./ext`` produced. In a source checkout you
can instead compile on the fly with ``torch.utils.cpp_extension.load``, by
setting the variable before the first import (in a notebook:
``os.environ["MYLINEAROPS_JIT"] = "1"`` in the first cell):

    MYLINEAROPS_JIT=1 python -c "import mylinearops"

``import mylinearops`` then calls ``build()``; calling it again returns the
loaded library's path. (A package imported from a checkout that has no
compiled ``_C`` falls back to this build by itself, with a warning.)

The build directory is persistent (``ext/.jit-build/torch-<version>/`` by
default, ``MYLINEAROPS_BUILD_DIR`` to move it), so an unchanged extension is not
recompiled: ninja finds nothing to do and the library is just loaded. It is one
directory per torch release because neither ninja (torch's headers come in
through ``-isystem``, which the compiler leaves out of its dependency lists) nor
torch's own check notices a new torch: a build kept across a torch upgrade would
load and fail with ``undefined symbol``.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from . import _build_config as cfg

# The library this process has loaded: the operators can be registered only
# once per process (a second copy would abort in its static initialisers).
_loaded: dict[str, str] = {}


def source_dir() -> Path:
    """The ext/ directory holding csrc/, or an error saying how to get one."""
    root = Path(os.environ.get("MYLINEAROPS_SOURCE_DIR", cfg.EXT_DIR))
    if not (root / "csrc" / "mylinearops.cpp").exists():
        raise RuntimeError(
            f"mylinearops: the C++ sources are not at {root / 'csrc'}. The JIT build needs a "
            "source checkout (the book's ext/ directory); point MYLINEAROPS_SOURCE_DIR at it, "
            "or use the packaged build: pip install --no-build-isolation ./ext"
        )
    return root


def default_build_dir(with_cuda: bool) -> Path:
    name = _library_name(with_cuda)
    base = os.environ.get("MYLINEAROPS_BUILD_DIR")
    if base:
        return Path(base) / name
    import torch

    return source_dir() / ".jit-build" / f"torch-{torch.__version__}" / name


def _library_name(with_cuda: bool) -> str:
    return "mylinearops_jit_cuda" if with_cuda else "mylinearops_jit_cpu"


def build(
    *, with_cuda: bool | None = None, verbose: bool = False, build_dir: str | os.PathLike | None = None
) -> str:
    """Compile (only what changed) and load the library; return the .so path.

    with_cuda: None follows MYLINEAROPS_CUDA (auto: CUDA kernels if nvcc is
    found). Calling build() again in the same process returns the loaded
    library; after editing the sources, restart the process to load the new one.
    """
    if _loaded:
        path = _loaded["path"]
        newest = max(os.path.getmtime(p) for p in _all_files())
        if os.path.exists(path) and newest > os.path.getmtime(path):
            warnings.warn(
                "mylinearops: sources changed since the library was loaded; a process can load "
                "the operators only once, so restart it (e.g. the notebook kernel) to rebuild",
                stacklevel=2,
            )
        return path
    if _packaged_library_loaded():
        raise RuntimeError(
            "mylinearops: the packaged library (mylinearops._C) is already loaded in this process, "
            "and the operators can be registered only once. To use the JIT build, set "
            "MYLINEAROPS_JIT=1 before the first `import mylinearops` (e.g. restart the notebook kernel)."
        )
    root = source_dir()
    if with_cuda is None:
        with_cuda = cfg.want_cuda()  # first: may set CUDA_HOME for cpp_extension
    elif with_cuda:
        toolkit = cfg.find_cuda_home()
        if toolkit is None:
            raise RuntimeError("mylinearops: with_cuda=True but no CUDA toolkit (nvcc) was found; set CUDA_HOME")
        cfg.use_cuda_home(toolkit)
    if with_cuda:
        cfg.set_default_cuda_arch_list()
    cfg.check_toolchain(need_ninja=True)
    cfg.check_linker()
    directory = Path(build_dir) if build_dir is not None else default_build_dir(with_cuda)
    directory.mkdir(parents=True, exist_ok=True)

    load = cfg.import_cpp_extension().load
    start = time.perf_counter()
    path = load(
        name=_library_name(with_cuda),
        sources=cfg.sources(with_cuda, root),
        extra_cflags=cfg.cxx_flags(with_cuda),
        extra_cuda_cflags=cfg.nvcc_flags(),
        extra_ldflags=cfg.link_flags(),
        build_directory=str(directory),
        with_cuda=with_cuda,
        is_python_module=False,
        verbose=verbose,
    )
    cfg.check_cxx_runtime(path)  # before anything formats a number in it
    _loaded.update(path=str(path), seconds=f"{time.perf_counter() - start:.2f}")
    return str(path)


def _all_files() -> list[Path]:
    root = source_dir()
    return [root / f for f in cfg.CPU_SOURCES + cfg.CUDA_SOURCES + cfg.HEADERS if (root / f).exists()]


def _packaged_library_loaded() -> bool:
    import sys

    return "mylinearops._C" in sys.modules
