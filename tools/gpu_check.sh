#!/usr/bin/env bash
# The book's GPU check, for a machine with an NVIDIA GPU (CI has none). From the repository root:
#
#   OUT=/path/to/results bash tools/gpu_check.sh
#
# $OUT receives summary.txt, logs.tar.gz, the benchmark's results file (cuda-<gpu>.json, .md),
# gpu-facts.json and nbval.xml. Uses the python3 on PATH and its torch, whatever release that is. A folder .whl/ of wheels,
# if present, is installed first (into /tmp/gpu-check-site) for the notebooks' kernel: an image
# without a package index gets them from tools/gpu_wheels.sh, carried beside the tree. Steps,
# each logged to $OUT and none stopping the next:
#   1. build the extension (regular ABI) with CUDA kernels for this GPU's architecture;
#   2. run ext/tests/test_cuda.py on the GPU;
#   3. the GPU benchmark (ext/bench/bench_matmul.py --device cuda): results file into $OUT;
#   4. tools/gpu_facts.py: the chapters' GPU-only measurements, into $OUT/gpu-facts.json;
#   5. side by side, bounded by the time left: the whole ext/tests suite, the stable-ABI build
#      with CUDA kernels and test_cuda.py against it, and strict nbval of the chapters that
#      import torch, with the GPU present.
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
    (cd "$1" && MYLINEAROPS_ABI=$2 MYLINEAROPS_CUDA=1 TORCH_CUDA_ARCH_LIST=$ARCH MAX_JOBS=${JOBS:-$(nproc)} \
        $PY setup.py build_ext --inplace) && readelf -d "$1"/mylinearops/_C*.so | grep NEEDED
}

# Which C++ runtime a link would take: a GCC driver without libstdc++.so beside it links
# libstdc++.a, and the extension then carries a copy of its own (setup.py refuses it).
SYS_CXX=$($PY -c "import sysconfig; print((sysconfig.get_config_var('CXX') or 'c++').split()[0])")
{ env | grep -E '^(CC|CXX|LDSHARED|LDFLAGS)=' ; echo "sysconfig CXX: $SYS_CXX";
  for cxx in "$SYS_CXX" c++ g++ g++-12; do command -v "$cxx" && "$cxx" --version | head -1 \
      && "$cxx" -print-file-name=libstdc++.so && "$cxx" -print-file-name=libstdc++.a; done; } >"$LOG/cxx-runtime.txt" 2>&1

REGULAR=/tmp/gpu-check-ext-regular
step "build: regular ABI, CUDA for sm_${ARCH/./}"
if ! build_ext "$REGULAR" regular >"$LOG/build-regular.log" 2>&1; then
    step "build FAILED (build-regular.log, cxx-runtime.txt)"; tail -3 "$LOG/build-regular.log" | tee -a "$OUT/summary.txt"
    for pair in gcc:g++ gcc-12:g++-12; do  # the compilers on PATH, as the error message suggests
        command -v "${pair#*:}" >/dev/null || continue
        export CC=${pair%:*} CXX=${pair#*:}
        step "build again with CC=$CC CXX=$CXX"
        build_ext "$REGULAR" regular >"$LOG/build-regular-$CXX.log" 2>&1 && break
        step "FAILED again"; unset CC CXX
    done
    [ -n "${CXX:-}" ] || { tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs; exit 1; }
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

# What is left needs no quiet GPU: the CPU-bound suite, the stable build and the notebooks run
# side by side on the machine's cores, each bounded by the time left.
step "in parallel ($(left) s left): ext/tests whole suite; stable ABI build + test_cuda.py; strict nbval"
STOP=$(( $(left) - 20 ))
(cd "$REGULAR" && PYTHONPATH=.:${PYTHONPATH:-} timeout -s INT $STOP \
    $PY -m pytest -q -rs -p no:cacheprovider -n 6 tests) >"$LOG/ext-tests-all.log" 2>&1 &
SUITE=$!

STABLE=/tmp/gpu-check-ext-stable
( if JOBS=4 build_ext "$STABLE" stable >"$LOG/build-stable.log" 2>&1; then
      (cd "$STABLE" && PYTHONPATH=.:${PYTHONPATH:-} timeout -s INT $(( $(left) - 20 )) \
          $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py) >"$LOG/ext-tests-cuda-stable.log" 2>&1
  else
      echo "stable build FAILED (build-stable.log)" >"$LOG/ext-tests-cuda-stable.log"
  fi ) &
STABLE_JOB=$!

# The chapters that use torch (the Makefile's one list): a GPU changes nothing in the others.
TORCH_CHAPTERS=$(make --no-print-directory -s print-cpu-kernel-chapters 2>/dev/null \
    || ls chapters/*.ipynb | grep -v '^chapters/sql_')  # the Makefile's filter, where make is missing
if ! $PY -c "import nbval, xdist, ipykernel, myst_nb" 2>/dev/null; then
    echo "no nbval, pytest-xdist, ipykernel or myst-nb for $PY: notebooks skipped (bring them as wheels" \
        "in .whl/: bash tools/gpu_wheels.sh $($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])'))" >"$LOG/nbval.log"
    NBVAL=
elif [ -n "$TORCH_CHAPTERS" ]; then
    PYTHONPATH=$REGULAR:$PWD:${PYTHONPATH:-} timeout -s INT $STOP \
        $PY -m pytest -n 8 --dist loadfile -q -p no:cacheprovider --tb=short --junitxml="$OUT/nbval.xml" $TORCH_CHAPTERS \
        >"$LOG/nbval.log" 2>&1 &
    NBVAL=$!
else
    echo "no make here to list the chapters that use torch: notebooks skipped" >"$LOG/nbval.log"
    NBVAL=
fi
wait $SUITE $STABLE_JOB $NBVAL
for f in ext-tests-all ext-tests-cuda-stable nbval; do
    step "$f"; tail -3 "$LOG/$f.log" | tee -a "$OUT/summary.txt"
done
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOG"
step "done"
