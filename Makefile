# PyTorch from the Inside: every command a reader or maintainer needs.
# Each target sets up what it needs (a .venv with the pinned requirements, the booktools
# helper package and, once it exists, the mylinearops extension), so it works from a clean clone.
#
#   make book                      build the website into _build/html (the main job)
#   make serve                     serve the built website on http://127.0.0.1:8000
#   make test                      run every test: unit tests, extension tests, strict nbval
#   make test-fast                 the quick loop: unit tests, checkers, extension tests (no notebooks, builds, browser)
#   make test-avx2                 strict nbval of every notebook as on a CPU without AVX-512
#   make test-sse-gemm             strict nbval of every notebook with GEMMs and convolutions on SSE kernels
#   make test-clang                build the extension with Clang (CPU kernels) and run its tests
#   make test-avx512-emulated      the extension's tests on its AVX-512 micro-kernels, emulated (SIMDe)
#   make test-other-torch          the stable-ABI wheel's tests under another torch release (2.13)
#   make test-colab                every chapter on Colab's published runtime (its Python and package versions)
#   make wheel                     build the extension's wheels into dist/ (stable ABI and regular; CPU, and CUDA where nvcc is)
#   make refresh                   re-execute all notebooks and store their outputs
#   make notebook NB=chapters/tensors.ipynb   execute one notebook, store and check its outputs
#   make sync                      rewrite the Colab bootstrap cells; write booktools/generated/ from `#| export` cells
#   make check                     static checks of the committed notebooks (incl. code formatting)
#   make format                    format the notebooks' code cells (ruff, 88 columns)
#   make bench                     benchmark the extension's kernels (ext/bench/results/)
#   make clean                     remove build outputs (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.book-requirements
EXT_STAMP   := $(VENV)/.book-extension
EXT_SOURCES := ext/setup.py ext/pyproject.toml $(shell find ext/csrc ext/mylinearops -type f \
               \( -name '*.py' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null)

.PHONY: print-cpu-kernel-chapters setup book serve format test test-fast test-avx2 test-sse-gemm test-clang test-avx512-emulated test-other-torch test-colab colab-venv wheel refresh notebook sync check bench clean

# What a CPU without AVX-512 looks like to every library the notebooks use: PyTorch's own
# kernels, MKL (torch.mm), oneDNN (convolutions) and mylinearops. The stored outputs must
# not depend on it.
#
# Each capped run gets its own torch.compile cache: inductor's on-disk cache does not key its
# entries on ATEN_CPU_CAPABILITY (torch 2.14.1), and on an AVX-512 CPU a model compiled under the
# avx2 cap from entries an uncapped run had stored gave outputs 10x the float32 rounding bound
# away from eager (when_to_write_an_op); a fresh cache gave identical outputs.
AVX2_ONLY := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MYLINEAROPS_ISA=avx2 \
             TORCHINDUCTOR_CACHE_DIR=$(abspath _build/inductor-cache-avx2)

# On a CPU without AVX-512, AVX2_ONLY changes nothing. This one changes the summation order of
# every matrix product and convolution on any x86 CPU: MKL, oneDNN and mylinearops held to their
# SSE-era kernels. PyTorch's own kernels stay at AVX2: with ATEN_CPU_CAPABILITY=default,
# torch.compile's C++ code does not compile (torch 2.14.1: `at::vec` undeclared).
SSE_GEMM := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 MYLINEAROPS_ISA=generic \
            TORCHINDUCTOR_CACHE_DIR=$(abspath _build/inductor-cache-sse-gemm)

# The chapters whose stored outputs can depend on the CPU's kernels, and so the only ones the
# capped runs (test-avx2, test-sse-gemm) execute again: all but Part IV's, which import no torch
# (tests/test_ci.py checks that every chapter left out imports neither torch nor mylinearops).
CPU_KERNEL_CHAPTERS := $(filter-out chapters/sql_%,$(wildcard chapters/*.ipynb))

# make test and the capped runs spread their test files over JOBS pytest workers (pytest-xdist):
# one notebook's cells stay on one worker, in one kernel. JOBS=0 runs them in one process.
# Files are handed out in collection order, which puts the longest first
# (booktools/maintain/pytest_longest_first.py), not xdist's default (most tests first).
# OpenMP threads that wait at a barrier sleep instead of spinning: with two workers of two
# threads each on two cores, a spinning thread holds the core its partner needs (a small conv
# net's training step took 2.4x as long as alone; sleeping, 1.6x for two at once). The thread
# count, and so every result, stays as it is.
# torch.compile compiles in the kernel's own process: by default each kernel that compiles starts
# a pool of compile workers, each a Python that imports torch (2-3 s of CPU per notebook), which
# on two busy cores only adds processes. The generated code is the same.
JOBS ?= 2
WORKERS := -n $(JOBS) --dist loadfile --no-loadscope-reorder
PARALLEL := OMP_WAIT_POLICY=PASSIVE TORCHINDUCTOR_COMPILE_THREADS=1

setup: $(STAMP) $(EXT_STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet "$$(grep -E '^pip==' requirements.txt)"  # the pinned pip first
	# Byte-compiled here, as pip does by default: where PYTHONDONTWRITEBYTECODE is set (as on
	# the machines this book is built on), Python never stores what it compiles on import, and
	# every process compiled torch's modules again (import torch, torchvision: 5.8 s, not 3.0 s).
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps --no-build-isolation --editable .
	touch $@

# The mylinearops extension, built from source against the installed torch. Its CUDA kernels
# are compiled whenever nvcc is found, GPU or not (ext/README.md lists the switches).
$(EXT_STAMP): $(STAMP) $(EXT_SOURCES)
	$(PIP) install --quiet --no-deps --no-build-isolation ./ext
	touch $@

book: setup
	$(PY) -m booktools.maintain.website build
	@echo "Website: _build/html/index.html (make serve to browse it)"

serve:
	@test -f _build/html/index.html || { echo "no website yet: run make book first"; exit 2; }
	$(PY) -m http.server --bind 127.0.0.1 --directory _build/html $${PORT:-8000}

test: setup
	$(PARALLEL) $(PY) -m pytest $(WORKERS)

# The contributors' loop, about a minute: everything but the tests marked slow (notebooks,
# builds of the extension or the website, the browser), on the same workers as make test. It
# tests the extension as `make setup` last built it (rebuilt first only if its sources changed).
test-fast: setup
	$(PARALLEL) $(PY) -m pytest -q -m "not slow" $(WORKERS) tests ext/tests

# On a CPU without AVX-512 the cap changes no kernel, and the run would repeat make test.
test-avx2: setup
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	    echo "$(AVX2_ONLY) pytest $(CPU_KERNEL_CHAPTERS)"; \
	    $(AVX2_ONLY) $(PARALLEL) $(PY) -m pytest $(WORKERS) $(CPU_KERNEL_CHAPTERS); \
	else \
	    echo "test-avx2: skipped: this CPU has no AVX-512, so the AVX2 cap changes no kernel (make test ran them)"; \
	fi

test-sse-gemm: setup
	$(SSE_GEMM) $(PARALLEL) $(PY) -m pytest $(WORKERS) $(CPU_KERNEL_CHAPTERS)

# For tests/test_ci.py: the chapters the capped runs execute.
print-cpu-kernel-chapters:
	@echo $(CPU_KERNEL_CHAPTERS)

# The extension must build with Clang too (Debian: apt-get install clang libomp-dev): a scratch
# copy of ext/ is built in place with CC=clang (CPU kernels only) and its tests run against it.
# $(call scratch_ext_tests,DIR,BUILD_ENV,TEST_ENV): copy ext/ to DIR, build it there (CPU
# kernels only) with BUILD_ENV, and run the extension's tests against that build with TEST_ENV.
define scratch_ext_tests
	rm -rf $(1) && mkdir -p $(1)
	cp -r ext/. $(1)/
	rm -rf $(1)/build $(1)/*.egg-info && find $(1) -name '*.so' -delete
	cd $(1) && $(2) MYLINEAROPS_CUDA=0 $(abspath $(PY)) setup.py -q build_ext --inplace
	cd $(1) && $(3) MYLINEAROPS_CUDA=0 PYTHONPATH=. $(abspath $(PY)) -m pytest -q -p no:cacheprovider tests
endef

CLANG_DIR := _build/clang-ext
test-clang: setup
	$(call scratch_ext_tests,$(CLANG_DIR),CC=clang CXX=clang++,MYLINEAROPS_EXPECT_COMPILER=clang)

# The AVX-512 micro-kernels (12 x 32 tiles) run only on AVX-512 CPUs, which CI may never get.
# A scratch copy of ext/ built with MYLINEAROPS_AVX512_VIA_SIMDE=1 (Debian: apt-get install
# libsimde-dev) runs them on any CPU, their intrinsics emulated; the extension's tests then
# run with MYLINEAROPS_ISA=avx512, so that `auto` and every packed product uses them.
SIMDE_DIR := _build/avx512-emulated-ext
test-avx512-emulated: setup
	$(call scratch_ext_tests,$(SIMDE_DIR),MYLINEAROPS_AVX512_VIA_SIMDE=1,MYLINEAROPS_ISA=avx512 MYLINEAROPS_EXPECT_AVX512_EMULATED=1)

# The wheels to distribute (ext/README.md says which to use when): the stable-ABI one, for
# every torch >= 2.10 on CPython >= 3.9, and the regular one, for exactly the installed torch.
# Each with CPU kernels only, which load under a CPU or a CUDA build of torch, and again with
# CUDA kernels where MYLINEAROPS_CUDA says (auto: if nvcc and a CUDA torch are found); a CUDA
# wheel needs a CUDA build of torch. The CPU wheels are the ones the chapter "Shipping the
# extension" and tests/test_shipping.py use, from the same cache (_build/wheels/).
# CUDA_WHEELS=stable leaves out the regular CUDA wheel: CI does, because make setup has just
# compiled that same build (regular ABI, CUDA kernels) and installed it.
CUDA_WHEELS ?= stable regular
wheel: setup
	$(PY) -m booktools.shipping wheel --abi stable --cuda 0
	$(PY) -m booktools.shipping wheel --abi regular --cuda 0
	for abi in $(CUDA_WHEELS); do \
	    $(PY) -m booktools.shipping wheel --abi $$abi --cuda $${MYLINEAROPS_CUDA:-auto} || exit 1; \
	done

# The stable ABI's promise, checked: the stable wheel (CPU kernels) built here against the
# pinned torch passes the extension's tests in a venv with another torch release.
test-other-torch: setup
	$(PY) -m booktools.shipping test-other-torch

# Every chapter, top to bottom in a fresh kernel, on the package versions of Colab's runtime
# (data/colab/pip-freeze.gpu.<commit>.txt, in a Python 3.13 venv under _build/colab/), through
# its own bootstrap cell. Fails if a cell raises whose lesson is not an error; prints how the
# outputs differ from the stored ones, by kind. CHAPTERS=... runs only those.
test-colab: colab-venv
	$(PY) -m booktools.maintain.colab_runtime run $(CHAPTERS)

colab-venv: setup
	$(PY) -m booktools.maintain.colab_runtime venv

refresh: setup
	$(PY) -m booktools.maintain.notebooks refresh

notebook: setup
	@test -n "$(NB)" || { echo "usage: make notebook NB=chapters/<name>.ipynb"; exit 2; }
	$(PY) -m booktools.maintain.notebooks refresh $(NB)
	$(PY) -m pytest $(NB)

sync: setup
	$(PY) -m booktools.maintain.notebooks sync

check: setup
	$(PY) -m booktools.maintain.notebooks check
	$(VENV)/bin/ruff format --check --quiet chapters

# Code cells formatted to the column the website shows; then re-export the #| export cells.
format: setup
	$(VENV)/bin/ruff format chapters
	$(PY) -m booktools.maintain.notebooks sync

bench: setup
	$(PY) ext/bench/bench_matmul.py

clean:
	rm -rf _build dist ext/build ext/.jit-build .jit-build
