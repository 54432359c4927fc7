"""mylinearops: matrix multiplication and a linear layer as real PyTorch operators.

C++ (CPU) and CUDA kernels registered with the dispatcher under
``torch.ops.mylinearops``, with autograd and fake (meta) implementations so
they work with ``torch.compile``. The public API:

    mylinearops.matmul(A, B, algo="auto")          # A (m, k) @ B (k, n)
    mylinearops.linearop(X, W, b=None, algo="auto")  # X (..., in) @ W (in, out) + b
    mylinearops.LinearLayer(in_features, out_features, bias=True)
    mylinearops.available_algos("cpu")             # kernel variants for algo=
    mylinearops.cpu_info()                         # caches, micro-kernel choice, cache blocks
    mylinearops.tuning_info()                      # the float tile and blocks measured fastest here

Loading: ``import mylinearops`` loads the compiled extension ``mylinearops._C``
built by ``pip install --no-build-isolation ./ext``. With ``MYLINEAROPS_JIT=1``
(or when no compiled extension is present in a source checkout) it compiles
the sources with torch.utils.cpp_extension.load instead; see mylinearops.jit.
"""

from __future__ import annotations

import importlib.util
import os
import warnings

import torch  # noqa: F401  (loads libtorch before the extension)

from . import jit as jit


def _load_library() -> str:
    """Load the compiled operators; return where they came from."""
    if os.environ.get("MYLINEAROPS_JIT", "0").strip().lower() in ("1", "true", "yes"):
        jit.build()
        return "jit"
    if importlib.util.find_spec("mylinearops._C") is not None:
        from . import _C  # noqa: F401  (registers the operators)

        return "package"
    try:
        jit.source_dir()
    except RuntimeError:
        raise ImportError(
            "mylinearops: the compiled extension mylinearops._C is missing. Build it with "
            "`pip install --no-build-isolation ./ext` (from the book's repository root)."
        ) from None
    warnings.warn(
        "mylinearops: no compiled extension next to the package (it was not installed with pip), "
        "so it is being built from source with the JIT; this takes up to a minute the first time "
        "and seconds afterwards. Set MYLINEAROPS_JIT=1 to choose this explicitly.",
        stacklevel=2,
    )
    jit.build()
    return "jit"


_LOADED_FROM = _load_library()

from .machine import (  # noqa: E402
    cpu_clock_ghz,
    cpu_identity,
    cpu_info,
    fma_peak_gflops,
    gpu_driver_version,
    gpu_fma_loop,
    gpu_fma_peak_gflops,
    last_gemm_plan,
    machine_id,
    microkernel_gflops,
    tuning_info,
)
from .modules import LinearLayer  # noqa: E402
from .ops import ALGOS, available_algos, build_info, linearop, matmul  # noqa: E402

__all__ = [
    "ALGOS",
    "LinearLayer",
    "available_algos",
    "build_info",
    "cpu_clock_ghz",
    "cpu_identity",
    "cpu_info",
    "fma_peak_gflops",
    "gpu_driver_version",
    "gpu_fma_loop",
    "gpu_fma_peak_gflops",
    "jit",
    "last_gemm_plan",
    "linearop",
    "machine_id",
    "matmul",
    "microkernel_gflops",
    "tuning_info",
]
