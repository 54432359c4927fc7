"""Packaged build: ``pip install --no-build-isolation ./ext``.

Builds the extension module ``mylinearops._C``: CPU kernels always, CUDA
kernels too when a CUDA toolkit is found (MYLINEAROPS_CUDA=auto|1|0). Sources
and flags come from mylinearops/_build_config.py, shared with the JIT build.

MYLINEAROPS_ABI picks the front end (same kernels, same operators):
  regular (default)  the ATen C++ API; the wheel works only with the torch it
                     was built against, and says so (requires torch==X.Y.Z);
  stable             the LibTorch stable ABI + Python's limited API: one wheel
                     (tagged cp39-abi3) for every torch >= 2.10 on CPython >= 3.9.
The version's local label names the build: 0.1.0+torch2.14.1.cpu (regular),
0.1.0+cpu or 0.1.0+cu130 (stable).
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
abi = cfg.abi()
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

import torch  # noqa: E402  (after want_cuda, which may set CUDA_HOME)

stable = abi == "stable"
sources = cfg.sources(with_cuda, root=Path(""), python_module=True, abi_name=abi)
if with_cuda:
    print(f"mylinearops: building the {abi} ABI build, CPU + CUDA kernels (TORCH_CUDA_ARCH_LIST={archs})", file=sys.stderr)
    extension = CUDAExtension(
        "mylinearops._C",
        sources,
        extra_compile_args={"cxx": cfg.cxx_flags(True, abi), "nvcc": cfg.nvcc_flags(abi)},
        extra_link_args=cfg.link_flags(),
        py_limited_api=stable,
    )
else:
    print(f"mylinearops: building the {abi} ABI build, CPU kernels only (MYLINEAROPS_CUDA={cfg.cuda_mode()})", file=sys.stderr)
    extension = CppExtension(
        "mylinearops._C",
        sources,
        extra_compile_args={"cxx": cfg.cxx_flags(False, abi)},
        extra_link_args=cfg.link_flags(),
        py_limited_api=stable,
    )

# The wheel's metadata tells pip what the binary needs: the exact torch (regular),
# or any torch from the stable target on (stable).
torch_release = torch.__version__.split("+")[0]
accelerator = "cu" + torch.version.cuda.replace(".", "") if with_cuda else "cpu"
if stable:
    local_label = accelerator
    requires_torch = "torch>={}.{}".format(*cfg.STABLE_TORCH_TARGET)
else:
    local_label = f"torch{torch_release}.{accelerator}"
    requires_torch = f"torch=={torch_release}"

class CheckedBuildExtension(BuildExtension):
    """torch's BuildExtension, with checks that the library links the shared C++ runtime:
    of the linker before compiling, of the library after linking."""

    def build_extensions(self):
        # distutils links a C++ extension with the C++ compiler's command (CXX or sysconfig's)
        command = getattr(self.compiler, "compiler_cxx", None) or self.compiler.linker_so
        cfg.check_linker(next(word for word in command if word != "env" and "=" not in word))
        super().build_extensions()
        for ext in self.extensions:
            cfg.check_cxx_runtime(self.get_ext_fullpath(ext.name))


setup(
    version=f"0.1.0+{local_label}",
    install_requires=[requires_torch],
    ext_modules=[extension],
    cmdclass={"build_ext": CheckedBuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp{}{}".format(*cfg.STABLE_PYTHON_TARGET)}} if stable else {},
)
