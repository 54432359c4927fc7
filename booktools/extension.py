"""Tools the custom-operator chapters use to look at, build and test the `mylinearops` extension.

- `EXT_DIR`, `print_tree`: where the extension lives and what its source tree holds.
- `op_call_tree` / `print_call_tree`: the operators (ATen and custom) that one call runs, in call
  order, from `torch.profiler`.
- `build_cpp_module`: compile one C++ source into a Python module with
  `torch.utils.cpp_extension.load`, in a persistent build directory (`BUILD_DIR`).
- `run_python`: run Python code in a fresh interpreter. A process can register an operator
  library only once, so a second build of `mylinearops` (the JIT build) must run elsewhere.
- `run_cuda_emulator`: compile and run ext/tests/cuda_emulator, which executes the CUDA kernels
  on the CPU and checks them against a float64 reference.
- `committed_results`: a benchmark results file committed under ext/bench/results/, or None.
- `recorded_machines` / `print_recorded_machines`: the headline figures of every machine whose
  benchmark results are committed, side by side, each named with its CPU and date.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from booktools.paths import EXT_DIR, REPO_ROOT
from booktools.profiling import call_tree, print_call_tree  # noqa: F401  (re-exported for the chapters)

RESULTS_DIR = EXT_DIR / "bench" / "results"
# Build outputs of the chapters' own small C++ modules (gitignored, like ext/.jit-build/).
BUILD_DIR = REPO_ROOT / ".jit-build"


# ------------------------------------------------------------------------------ source tree
def print_tree(root: Path, sub_dirs=("csrc", "mylinearops"), suffixes=(".py", ".h", ".cpp", ".cu", ".cuh")) -> None:
    """Print the source files under each root/sub_dir, one path per line (no build outputs)."""
    for sub in sub_dirs:
        print(f"{sub}/")
        for path in sorted((root / sub).rglob("*")):
            if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts:
                print("    " + path.relative_to(root / sub).as_posix())


# ------------------------------------------------------------------------------ call trees
# Autograd engine wrappers around each node: dropped, their children kept.
_WRAPPER_PREFIXES = ("autograd::engine::evaluate_function: ",)
# Bookkeeping around leaf gradients: dropped with their children.
_HIDDEN = frozenset({"torch::autograd::AccumulateGrad", "aten::detach", "detach"})


def op_call_tree(fn, *args, hide=_HIDDEN, **kwargs) -> list[tuple[int, str]]:
    """Run fn(*args, **kwargs) under torch.profiler; return the recorded calls as (depth, name).

    The list is in call order; depth 0 are the calls made from Python (and the autograd
    nodes the backward pass runs). Custom operators appear under their qualified names
    (e.g. mylinearops::linearop). No timings: those vary run to run.
    """
    return call_tree(
        fn, *args, include=lambda event: not event.name.startswith(_WRAPPER_PREFIXES), hide=hide, **kwargs
    )


# ------------------------------------------------------------------------------ building
def build_cpp_module(name: str, source: str, extra_cflags=("-O2",)):
    """Compile `source` (C++ text) into the Python module `name` and import it.

    The build directory BUILD_DIR/name persists, so an unchanged source is not recompiled
    (the first build of a module that includes ATen takes 15-30 s on a 2-core machine).
    """
    from mylinearops import _build_config

    cpp_extension = _build_config.import_cpp_extension()  # without its "no CUDA runtime" warning
    _build_config.check_linker()
    directory = BUILD_DIR / name
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.cpp"
    if not path.exists() or path.read_text(encoding="utf-8") != source:
        path.write_text(source, encoding="utf-8")  # rewritten only when changed: ninja compares times
    return cpp_extension.load(name=name, sources=[str(path)], build_directory=str(directory),
                              extra_cflags=list(extra_cflags), verbose=False)


def compiler_diagnostics(source: str, timeout: float = 300) -> list[str]:
    """Compile C++ `source` against torch's headers (syntax and types only, no code generated).

    Returns the compiler's errors and warnings as "error: ..." / "warning: ..." lines, without
    file names or positions, each once, in order; a deprecation warning is shortened to the
    first sentence of the library's reason. Needs a C++20 compiler, as torch's headers do.
    """
    from mylinearops import _build_config

    cpp_extension = _build_config.import_cpp_extension()
    includes = [f"-I{path}" for path in cpp_extension.include_paths()]
    cxx = os.environ.get("CXX", "c++")
    out = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", *includes, "-x", "c++", "-"],
                         input=source, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "LC_ALL": "C"})  # plain quotes, English messages
    found = []
    for line in out.stderr.splitlines():
        match = re.search(r"\b(error|warning): (.*)$", line)
        if match:
            text = re.sub(r" \[-W[\w-]+\]$", "", match[2])  # the flag that enabled a warning
            if " is deprecated: " in text:  # keep the library's reason, not the long signature
                text = "deprecated: " + text.split(" is deprecated: ", 1)[1].split(". ")[0]
            message = f"{match[1]}: {text}"
            if message not in found:
                found.append(message)
    return found


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """Run `code` with this interpreter in a new process; return its stdout.

    env: variables added to (or, with value None, removed from) this process's environment.
    A failure raises RuntimeError with the end of the child's stderr.
    """
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    out = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True,
                         timeout=timeout, cwd=REPO_ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"child process failed (exit status {out.returncode}):\n{out.stderr[-3000:]}")
    return out.stdout


def run_json(code: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    """run_python for code whose last line of output is a JSON object; returns that object."""
    return json.loads(run_python(code, env, timeout).strip().splitlines()[-1])


# ------------------------------------------------------------------------------ CUDA emulator
def run_cuda_emulator(timeout: float = 600) -> dict:
    """Compile ext/tests/cuda_emulator/run_kernels.cpp as plain C++ and run it.

    It executes every CUDA kernel of ext/csrc/cuda/matmul_kernels.cuh on the CPU (threads as
    coroutines, __syncthreads as a barrier) for both dtypes and every operand layout, and
    compares with a float64 reference. Returns {"summary", "runs", "failures", "seconds"}.
    """
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        raise RuntimeError(f"no C++ compiler ({cxx}) to build the CUDA emulator")
    source = EXT_DIR / "tests" / "cuda_emulator" / "run_kernels.cpp"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "run_kernels"
        subprocess.run([cxx, "-std=c++20", "-O1", "-Wno-unknown-pragmas", "-o", str(exe), str(source)],
                       check=True, capture_output=True, text=True, timeout=timeout)
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
    summary = run.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"(\d+) runs, (\d+) failures", summary)
    if match is None:
        raise RuntimeError(f"unexpected emulator output:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return {"summary": summary, "runs": int(match[1]), "failures": int(match[2]),
            "failure_lines": [line for line in run.stdout.splitlines() if line.startswith("FAIL")],
            "seconds": time.perf_counter() - start}


# ------------------------------------------------------------------------------ results
def committed_results(name: str) -> dict | None:
    """ext/bench/results/<name>.json as a dict, or None if no such file is committed."""
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def newest_results(device: str) -> dict | None:
    """The newest committed results file of `device` ("cpu" or "cuda"), by the date its machine
    recorded; None if there is none."""
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in RESULTS_DIR.glob(f"{device}-*.json")]
    return max(reports, key=lambda report: report["machine"]["date_utc"], default=None)


def cpu_name(cpu: dict) -> str:
    """A CPU as the book names it (`cpu` as mylinearops.cpu_identity() reports it): its model
    name, and its core's name where known ("AMD EPYC, Zen 4"; Intel's CPUs by model name alone)."""
    return f"{cpu['model_name']}, {cpu['core']}" if cpu.get("core") else cpu["model_name"]


def _forward(report: dict, m: int, k: int, n: int) -> dict:
    row = next((r for r in report["results"] if r["kind"] == "forward" and (r["m"], r["k"], r["n"]) == (m, k, n)), None)
    return row["variants"] if row else {}


def recorded_machines(device: str = "cpu") -> list[dict]:
    """One summary per committed results file of `device`, oldest first: the machine, its
    date and threads, the measured FMA peak (None where the file predates peak measurement)
    and, at 1024^3 FP32, `auto` and torch.mm in GFLOP/s with their ratio; numpy where
    measured; the MLP training-step ratio."""
    out = []
    for path in sorted(RESULTS_DIR.glob(f"{device}-*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        machine = report["machine"]
        fwd = _forward(report, 1024, 1024, 1024)
        # Format 1 files predate `auto` in the benchmark: their `auto` was packed_avx512.
        auto = fwd.get("auto") or fwd.get("packed_avx512") or fwd.get("packed_avx2") or {}
        threads = machine.get("threads") or machine.get("torch_threads")
        peak = None
        if "fma_peak_gflops" in machine:
            isa, peaks = max(machine["fma_peak_gflops"].items(), key=lambda item: item[1][str(threads)])
            peak = (isa, peaks[str(threads)])
        cpu = machine.get("cpu")
        if isinstance(cpu, dict):
            label = f"{cpu_name(cpu)} (family {cpu['family']}, model {cpu['model']})"
        else:
            label = machine.get("label", str(cpu))
        out.append({
            "file": path.name,
            "label": label,
            "date": machine["date_utc"][:10],
            "threads": threads,
            "format": report.get("format", 1),
            "peak": peak,
            "auto_gflops": auto.get("gflops"),
            "torch_gflops": fwd.get("torch.mm", {}).get("gflops"),
            "numpy_gflops": fwd.get("numpy", {}).get("gflops"),
            "auto_vs_torch": auto.get("vs_torch"),
            "auto_vs_numpy": auto.get("vs_numpy"),
            "auto_pct_of_peak": auto.get("pct_of_peak"),
            "mlp_step_ratio": report.get("mlp_train_step", {}).get("linearlayer_over_nn_linear"),
        })
    return sorted(out, key=lambda r: (r["date"], r["file"]))


def print_recorded_machines(device: str = "cpu", threads: int | None = None) -> None:
    """A table of `recorded_machines`, optionally only those run with `threads` threads."""
    def cell(value, spec: str, suffix: str = "") -> str:
        return "–" if value is None else format(value, spec) + suffix

    rows = [r for r in recorded_machines(device) if threads is None or r["threads"] == threads]
    header = ("results file", "date", "thr", "FMA peak", "auto", "torch", "numpy", "auto/torch", "auto/numpy",
              "% peak", "MLP step")
    table = [header] + [(
        r["file"].removesuffix(".json"), r["date"], str(r["threads"]),
        f"{r['peak'][1]:.0f} ({r['peak'][0]})" if r["peak"] else "not recorded",
        cell(r["auto_gflops"], ".0f"), cell(r["torch_gflops"], ".0f"), cell(r["numpy_gflops"], ".0f"),
        cell(r["auto_vs_torch"], ".2f", "x"), cell(r["auto_vs_numpy"], ".2f", "x"),
        cell(r["auto_pct_of_peak"], ".0%"), cell(r["mlp_step_ratio"], ".2f", "x"),
    ) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(text.ljust(w) if i < 2 else text.rjust(w) for i, (text, w) in enumerate(zip(row, widths))))
    for r in rows:
        print(f"  {r['file'].removesuffix('.json')}: {r['label']}")
