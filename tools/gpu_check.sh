#!/usr/bin/env bash
# The book's GPU check, for a machine with an NVIDIA GPU (CI has none). From the repository root:
#
#   OUT=/path/to/results bash tools/gpu_check.sh
#
# $OUT receives summary.txt, logs.tar.gz, the benchmark's results file (cuda-<gpu>.json, .md),
# gpu-facts.json and nbval.xml. Uses the python3 on PATH and its torch, whatever release that is. A folder .whl/ of wheels,
# if present, is installed first (into /tmp/gpu-check-site) for the notebooks' kernel. Steps,
# each logged to $OUT and none stopping the next:
#   1. build the extension (regular ABI) with CUDA kernels for this GPU's architecture;
#   2. run ext/tests on the GPU: test_cuda.py first, then the whole suite;
#   3. the GPU benchmark (ext/bench/bench_matmul.py --device cuda): results file into $OUT;
#   4. tools/gpu_facts.py: the chapters' GPU-only measurements, into $OUT/gpu-facts.json;
#   5. the stable-ABI build with CUDA kernels, and test_cuda.py against it;
#   6. strict nbval of the chapters that import torch, with the GPU present, while time is left.
# GPU_CHECK_BUDGET_S (default 480) bounds the whole run: later steps get what is left.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-_build/gpu-check}
LOG=$OUT/logs  # packed into $OUT/logs.tar.gz at the end: the device tool returns at most 8 files
mkdir -p "$LOG"
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET_S:-480}
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }
step() { echo "== [+$((SECONDS - START))s] $*" | tee -a "$OUT/summary.txt"; }
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1

if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-check-site .whl/*.whl \
        && export PYTHONPATH=/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}
fi

step "machine"
{ nvidia-smi; nproc; lscpu | grep -E 'Model name|Vendor|family|Model:'; } >"$LOG/machine.txt" 2>&1
$PY - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import sys, torch
p = torch.cuda.get_device_properties(0)
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
print(f"GPU {p.name}, compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB")
PY
ARCH=$($PY -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")

# $(build_ext DIR ABI): a scratch copy of ext/ built in place with CUDA kernels for this GPU.
build_ext() {
    rm -rf "$1" && mkdir -p "$1" && cp -r ext/. "$1"/
    rm -rf "$1"/build "$1"/*.egg-info && find "$1" -name '*.so' -delete
    # not -q: the log keeps the compile and link lines
    (cd "$1" && MYLINEAROPS_ABI=$2 MYLINEAROPS_CUDA=1 TORCH_CUDA_ARCH_LIST=$ARCH MAX_JOBS=$(nproc) \
        $PY setup.py build_ext --inplace) && readelf -d "$1"/mylinearops/_C*.so | grep NEEDED
}

# Which C++ runtime a link would take: a missing libstdc++.so beside the compiler makes the
# linker take libstdc++.a, and the extension then carries a copy of its own (the setup.py check).
{ for cxx in c++ g++-12; do command -v $cxx && $cxx --version | head -1 && $cxx -print-file-name=libstdc++.so \
      && ls -l "$($cxx -print-file-name=libstdc++.so)"; done; } >"$LOG/cxx-runtime.txt" 2>&1

REGULAR=/tmp/gpu-check-ext-regular
step "build: regular ABI, CUDA for sm_${ARCH/./}"
if ! build_ext "$REGULAR" regular >"$LOG/build-regular.log" 2>&1; then
    step "build FAILED (build-regular.log, cxx-runtime.txt)"; tail -5 "$LOG/build-regular.log" | tee -a "$OUT/summary.txt"
    if command -v g++-12 >/dev/null; then  # another compiler's runtime, before giving up
        step "build again with g++-12"
        export CC=gcc-12 CXX=g++-12
        build_ext "$REGULAR" regular >"$LOG/build-regular-gcc12.log" 2>&1 || { step "FAILED again"; tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs; exit 1; }
    else
        tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs; exit 1
    fi
fi

step "ext/tests/test_cuda.py (regular)"
(cd "$REGULAR" && PYTHONPATH=.:${PYTHONPATH:-} timeout 240 $PY -m pytest -q -rs -p no:cacheprovider tests/test_cuda.py) \
    >"$LOG/ext-tests-cuda.log" 2>&1
tail -3 "$LOG/ext-tests-cuda.log" | tee -a "$OUT/summary.txt"

step "GPU benchmark"
PYTHONPATH=$REGULAR:$PWD:${PYTHONPATH:-} timeout $(( $(left) > 240 ? 240 : $(left) )) \
    $PY ext/bench/bench_matmul.py --device cuda --out-dir "$OUT" >"$LOG/bench.log" 2>&1
tail -4 "$LOG/bench.log" | tee -a "$OUT/summary.txt"

step "GPU facts"
PYTHONPATH=$REGULAR:${PYTHONPATH:-} timeout 120 $PY tools/gpu_facts.py "$OUT/gpu-facts.json" >"$LOG/gpu-facts.log" 2>&1
tail -2 "$LOG/gpu-facts.log" | tee -a "$OUT/summary.txt"

step "ext/tests, the whole suite (regular)"
(cd "$REGULAR" && PYTHONPATH=.:${PYTHONPATH:-} timeout $(( $(left) > 200 ? 200 : $(left) )) \
    $PY -m pytest -q -rs -p no:cacheprovider -n 8 tests) >"$LOG/ext-tests-all.log" 2>&1
tail -3 "$LOG/ext-tests-all.log" | tee -a "$OUT/summary.txt"

STABLE=/tmp/gpu-check-ext-stable
step "build: stable ABI, CUDA; then test_cuda.py"
if build_ext "$STABLE" stable >"$LOG/build-stable.log" 2>&1; then
    (cd "$STABLE" && PYTHONPATH=.:${PYTHONPATH:-} timeout 120 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py) \
        >"$LOG/ext-tests-cuda-stable.log" 2>&1
    tail -2 "$LOG/ext-tests-cuda-stable.log" | tee -a "$OUT/summary.txt"
else
    step "stable build FAILED (build-stable.log)"
fi

# The chapters that use torch (the Makefile's one list): a GPU changes nothing in the others.
TORCH_CHAPTERS=$(make --no-print-directory -s print-cpu-kernel-chapters 2>/dev/null)
if [ -z "$TORCH_CHAPTERS" ]; then
    step "no make here to list the chapters that use torch: notebooks skipped"
elif [ "$(left)" -gt 60 ]; then
    step "strict nbval of the chapters that import torch, GPU present ($(left) s left)"
    PYTHONPATH=$REGULAR:$PWD:${PYTHONPATH:-} timeout -s INT $(( $(left) - 15 )) \
        $PY -m pytest -n 8 --dist loadfile -q -p no:cacheprovider --tb=short --junitxml="$OUT/nbval.xml" $TORCH_CHAPTERS \
        >"$LOG/nbval.log" 2>&1
    tail -3 "$LOG/nbval.log" | tee -a "$OUT/summary.txt"
else
    step "no time left for the notebooks"
fi
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOG"
step "done"
