"""The build: CUDA compiled wherever nvcc is, clear errors for missing tools, the JIT path."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import mylinearops
from mylinearops import _build_config as cfg



def test_build_info():
    info = mylinearops.build_info()
    assert info["loaded_from"] in ("package", "jit")
    assert Path(info["library"]).is_file()
    assert "generic" in info["cpu_microkernels"]
    assert info["compiler"].split()[0] in ("gcc", "clang") and isinstance(info["openmp"], bool)


def test_built_by_the_compiler_asked_for_with_openmp():
    """`make test-clang` builds with Clang and sets MYLINEAROPS_EXPECT_COMPILER=clang; the
    regular build is GCC's. Either way OpenMP must be on: without it the kernels run on one
    thread (the build prints a warning; this test makes it an error where it matters)."""
    info = mylinearops.build_info()
    expected = os.environ.get("MYLINEAROPS_EXPECT_COMPILER", "gcc")
    assert info["compiler"].startswith(expected + " "), info["compiler"]
    assert info["openmp"]


def test_avx512_kernels_emulated_only_in_their_test_build():
    """`make test-avx512-emulated` builds with MYLINEAROPS_AVX512_VIA_SIMDE=1 and runs the tests
    with MYLINEAROPS_EXPECT_AVX512_EMULATED=1 and MYLINEAROPS_ISA=avx512: only there may the
    AVX-512 kernels be software, and there every packed product must use them."""
    info = mylinearops.build_info()
    expected = os.environ.get("MYLINEAROPS_EXPECT_AVX512_EMULATED") == "1"
    assert info["avx512_emulated"] is expected
    if expected:
        assert "avx512" in info["cpu_microkernels"]
        if mylinearops.cpu_info()["isa_cap"] == "avx512":
            assert mylinearops.cpu_info()["preferred_isa"] == "avx512"
            mylinearops.matmul(torch.randn(300, 64), torch.randn(64, 96))
            assert mylinearops.last_gemm_plan()["microkernel"] == "avx512"


def test_avx512_emulation_switch(monkeypatch):
    for value, expected in [("1", ["-DMYLINEAROPS_AVX512_VIA_SIMDE", "-Wno-psabi"]), ("0", []), ("", [])]:
        monkeypatch.setenv("MYLINEAROPS_AVX512_VIA_SIMDE", value)
        if expected and not cfg.simde_available():
            continue  # no SIMDe here: the next test checks the message
        assert cfg.simde_flags() == expected
    monkeypatch.setenv("MYLINEAROPS_AVX512_VIA_SIMDE", "yes")
    with pytest.raises(ValueError, match=r"MYLINEAROPS_AVX512_VIA_SIMDE='yes' is not 0 or 1"):
        cfg.simde_flags()


def test_debug_info_switch(monkeypatch):
    # setuptools puts Python's CFLAGS (-g among them) first and these last, so these decide
    # (tests/test_shipping.py checks the built libraries).
    for value, expected in [("0", "-g0"), ("", "-g0"), ("1", "-g")]:
        monkeypatch.setenv("MYLINEAROPS_DEBUG_INFO", value)
        assert expected in cfg.cxx_flags(False) and expected in cfg.cxx_flags(True, "stable")
    monkeypatch.setenv("MYLINEAROPS_DEBUG_INFO", "yes")
    with pytest.raises(ValueError, match=r"MYLINEAROPS_DEBUG_INFO='yes' is not 0 or 1"):
        cfg.cxx_flags(False)


def test_avx512_emulation_without_simde_says_what_to_install(monkeypatch):
    monkeypatch.setenv("MYLINEAROPS_AVX512_VIA_SIMDE", "1")
    monkeypatch.setenv("CXX", "false")  # a "compiler" that finds nothing
    with pytest.raises(RuntimeError, match=r"needs SIMDe's headers.*apt-get install libsimde-dev"):
        cfg.simde_flags()


@pytest.mark.skipif(os.environ.get("MYLINEAROPS_CUDA", "auto") == "0", reason="MYLINEAROPS_CUDA=0: CPU-only build requested")
def test_cuda_kernels_compiled_wherever_nvcc_is():
    # A broken .cu file must fail the build even on GPU-less CI, so a build
    # that found a toolkit must contain the CUDA kernels.
    if torch.version.cuda is None or cfg.find_cuda_home() is None:
        pytest.skip("no CUDA toolkit (nvcc) or a CPU-only torch: nothing to compile CUDA with")
    assert mylinearops.build_info()["with_cuda"], "nvcc is available but the library was built without CUDA"


def test_cuda_mode_env_switch(monkeypatch):
    for value, expected in [("auto", "auto"), ("1", "1"), ("0", "0"), ("", "auto"), (" AUTO ", "auto")]:
        monkeypatch.setenv("MYLINEAROPS_CUDA", value)
        assert cfg.cuda_mode() == expected
    monkeypatch.setenv("MYLINEAROPS_CUDA", "yes")
    with pytest.raises(ValueError, match=r"MYLINEAROPS_CUDA='yes' is not one of auto, 0, 1"):
        cfg.cuda_mode()
    monkeypatch.setenv("MYLINEAROPS_CUDA", "0")
    assert cfg.want_cuda() is False


def test_forcing_cuda_without_toolkit_says_what_to_install(monkeypatch):
    monkeypatch.setenv("MYLINEAROPS_CUDA", "1")
    monkeypatch.setattr(cfg, "find_cuda_home", lambda: None)
    with pytest.raises(RuntimeError, match=r"MYLINEAROPS_CUDA=1 but .*Install the CUDA toolkit"):
        cfg.want_cuda()


def test_default_arch_list_for_gpu_less_builds(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cfg.set_default_cuda_arch_list() == cfg.DEFAULT_CUDA_ARCH_LIST
    assert "9.0" in os.environ["TORCH_CUDA_ARCH_LIST"]  # sm_90: H100
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    assert cfg.set_default_cuda_arch_list() == "8.0"  # an explicit choice wins


def test_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(RuntimeError, match=r"no C\+\+ compiler found \(looked for 'no-such-compiler-xyz'.*apt-get install g\+\+"):
        cfg.check_toolchain()


def test_missing_ninja_says_what_to_install(monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"needs the ninja build tool.*pip install ninja"):
        cfg.check_toolchain(need_ninja=True)


def test_jit_refuses_to_load_a_second_copy():
    if mylinearops.build_info()["loaded_from"] != "package":
        pytest.skip("only meaningful when the packaged library is loaded")
    with pytest.raises(RuntimeError, match=r"packaged library \(mylinearops._C\) is already loaded.*MYLINEAROPS_JIT=1"):
        mylinearops.jit.build()


def test_library_links_the_shared_cxx_runtime():
    # the JIT build says where its library is; the packaged one is the module mylinearops._C
    library = mylinearops.build_info().get("library") or importlib.util.find_spec("mylinearops._C").origin
    if shutil.which("nm") is None:
        pytest.skip("binutils' nm is missing: cannot list the library's symbols")
    assert cfg.copied_cxx_runtime(library) == []


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("g++") is None, reason="needs g++ and nm")
def test_a_static_copy_of_the_cxx_runtime_is_refused(tmp_path):
    # What a link line with a static libstdc++ produces: a library with its own iostreams.
    source = tmp_path / "fmt.cpp"
    source.write_text('#include <sstream>\n#include <string>\nstd::string fmt(long n) { std::ostringstream o; o << n; return o.str(); }\n')
    shared, static = tmp_path / "libshared.so", tmp_path / "libstatic.so"
    for out, extra in ((shared, []), (static, ["-static-libstdc++"])):
        subprocess.run(["g++", "-shared", "-fPIC", "-O1", *extra, str(source), "-o", str(out)], check=True)
    assert cfg.copied_cxx_runtime(shared) == []
    assert cfg.copied_cxx_runtime(static)
    with pytest.raises(RuntimeError, match=r"contains its own copy of the C\+\+ runtime"):
        cfg.check_cxx_runtime(static)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_linker_without_the_shared_cxx_runtime_is_refused_before_compiling(tmp_path, monkeypatch):
    # A GCC driver whose installation holds libstdc++.a but no libstdc++.so, as a GPU image's
    # /opt/gcc did: it answers -print-file-name with the bare name for what it lacks.
    static = subprocess.run(["g++", "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not Path(static).is_absolute():
        pytest.skip("this g++ has no libstdc++.a to point at")
    driver = tmp_path / "g++"
    driver.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -print-file-name=libstdc++.a) echo {static};; -print-file-name=*) echo "${{1#*=}}";; esac\n'
    )
    driver.chmod(0o755)
    assert cfg.static_only_cxx_runtime("g++") is None
    assert cfg.static_only_cxx_runtime(str(driver)) == static
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(RuntimeError, match=r"finds only a static C\+\+ runtime.*CC=gcc CXX=g\+\+"):
        cfg.check_linker(str(driver))
    monkeypatch.setenv("CXX", str(driver))  # as that GPU image set it
    with pytest.raises(RuntimeError, match=r"from the CXX environment variable"):
        cfg.check_linker(str(driver))
    with pytest.raises(RuntimeError, match=r"from the CXX environment variable"):
        cfg.check_linker()  # the JIT's default: $CXX
    cfg.check_linker(str(tmp_path / "no-such-compiler"))  # cannot tell: the link-time check decides
