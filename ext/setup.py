"""Packaged build: ``pip install --no-build-isolation ./ext``.

Builds the extension module ``mylinearops._C``: CPU kernels always, CUDA
kernels too when a CUDA toolkit is found (MYLINEAROPS_CUDA=auto|1|0). Sources
and flags come from mylinearops/_build_config.py, shared with the JIT build.
"""

import importlib.util
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def load_build_config():
    # By path: importing the package would try to load the library being built.
    spec = importlib.util.spec_from_file_location("_mylinearops_build_config", HERE / "mylinearops" / "_build_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cfg = load_build_config()
with_cuda = cfg.want_cuda()  # before importing cpp_extension: may set CUDA_HOME
if with_cuda:
    archs = cfg.set_default_cuda_arch_list()
cfg.check_toolchain(need_ninja=True)

cpp_extension = cfg.import_cpp_extension()
BuildExtension, CppExtension, CUDAExtension = (
    cpp_extension.BuildExtension,
    cpp_extension.CppExtension,
    cpp_extension.CUDAExtension,
)

sources = cfg.sources(with_cuda, root=Path(""), python_module=True)
if with_cuda:
    print(f"mylinearops: building CPU + CUDA kernels (TORCH_CUDA_ARCH_LIST={archs})", file=sys.stderr)
    extension = CUDAExtension(
        "mylinearops._C",
        sources,
        extra_compile_args={"cxx": cfg.cxx_flags(True), "nvcc": cfg.nvcc_flags()},
        extra_link_args=cfg.link_flags(),
    )
else:
    print(f"mylinearops: building CPU kernels only (MYLINEAROPS_CUDA={cfg.cuda_mode()})", file=sys.stderr)
    extension = CppExtension(
        "mylinearops._C",
        sources,
        extra_compile_args={"cxx": cfg.cxx_flags(False)},
        extra_link_args=cfg.link_flags(),
    )

setup(
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
