"""Benchmark the mylinearops kernels against torch.mm and numpy, on the machine it runs on.

    python ext/bench/bench_matmul.py            # full run: writes ext/bench/results/<machine>.{json,md}
    python ext/bench/bench_matmul.py --quick    # a minute or so, writes ext/bench/_scratch/
    python ext/bench/bench_matmul.py --threads 1
    python ext/bench/bench_matmul.py --rejudge ext/bench/results/<machine>.json  # new targets, old run

Every run first describes the machine: CPU vendor, family, model and flags, the cache sizes
the kernels read from the operating system, the library versions, the clock of a busy core
and, for each instruction set the CPU runs, the FP32 FMA peak *measured* with a loop of
independent FMAs (on one thread and on the benchmark's threads). Then, for every device
present (CPU always, CUDA when a GPU is visible), it measures GFLOP/s of each kernel variant,
of torch.mm (MKL / cuBLAS) and, on the CPU, of numpy (OpenBLAS), on square sizes and on the
shapes of the notes' MLP (batch 128: 784->256, 256->256, 256->10), forward and backward, and
the time of one training step of that MLP built from LinearLayer vs nn.Linear. Every variant
is first checked against a float64 reference; a variant that fails the check is reported and
not timed. Timings are interleaved (each round runs every variant once) and the median over
rounds is reported, because these machines are noisy. On a GPU: FP32 with TF32 off, timed
with CUDA events.

Results go to one file per machine, named after it (e.g. ``cpu-amd-f25-m1-2t.json``: vendor,
CPU family and model, threads), so a run never overwrites another machine's results.
"""

from __future__ import annotations

import os
import sys

# Set before numpy (imported by torch) loads OpenBLAS. OpenBLAS's threads spin for ~0.1 s
# after each call and would steal a core from whatever is timed next; timeout 4 (2^4
# cycles) puts them to sleep at once. With --threads N, numpy gets N threads too.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
if "--threads" in sys.argv[:-1]:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import mylinearops  # noqa: E402
from booktools.benchmark import best_of_alternating, interleaved_rounds, time_calls  # noqa: E402  (the chapters' timing too)

HERE = Path(__file__).resolve().parent
MLP_SHAPES = [(128, 784, 256), (128, 256, 256), (128, 256, 10)]  # (batch, in, out)
FORMAT = 2  # version of the results file layout (1: before machines were identified)

# The targets the book's issue tracker set for the CPU kernel (checked at 1024^3 FP32).
TARGETS = {"vs_torch": 1.0, "vs_numpy": 0.9, "pct_of_peak": 0.75, "mlp_step_time_ratio": 1.0}
# Where `auto` runs AVX-512 on an Intel CPU (two FMA units per core, and MKL's own code path),
# stricter ones: a share of the peak of 85%, and the micro-kernel alone 95% of one core's.
INTEL_AVX512_TARGETS = {**TARGETS, "pct_of_peak": 0.85, "microkernel_share": 0.95}
TARGET_SIZE = 1024  # the square size the targets are read at
TARGET_SHAPE_ROUND_FACTOR = 3  # that shape's rounds, as a multiple of the others'


# ---------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------

def machine_id(device: str, threads: int) -> str:
    """The results file's name: one per machine (and thread count), never shared."""
    if device == "cuda":
        return "cuda-" + re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name().lower()).strip("-")
    return mylinearops.machine_id(threads)


def library_versions() -> dict:
    blas = np.__config__.CONFIG.get("Build Dependencies", {}).get("blas", {})
    torch_blas = [line.strip() for line in torch.__config__.show().splitlines() if "Math Kernel" in line or "BLAS" in line]
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_blas": torch_blas[0].lstrip("- ") if torch_blas else "unknown",
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "numpy": np.__version__,
        "numpy_blas": f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip(),
        "numpy_blas_config": blas.get("openblas configuration", ""),
    }


def measured_peaks(threads: int, seconds: float) -> dict[str, dict[str, float]]:
    """GFLOP/s of the FMA loop per usable instruction set, on 1 and on `threads` threads."""
    peaks = {}
    for isa in mylinearops.build_info()["cpu_microkernels"]:
        counts = sorted({1, threads})
        peaks[isa] = {str(t): mylinearops.fma_peak_gflops(isa, t, seconds) for t in counts}
    return peaks


def higher_peaks(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per instruction set and thread count, the higher of two measurements of the FMA loop:
    other work on the machine can only slow it, so a low reading is a busy moment (one before
    a run read a 2-thread peak no higher than the 1-thread one, and shares of 139%)."""
    return {isa: {t: max(gflops, after.get(isa, {}).get(t, 0.0)) for t, gflops in peaks.items()} for isa, peaks in before.items()}


def gpu_description(peak_seconds: float) -> dict:
    """The current GPU: what CUDA reports of it and its FP32 FMA peak, measured."""
    props = torch.cuda.get_device_properties()
    return {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "driver": mylinearops.gpu_driver_version(),
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "fma_peak_gflops": mylinearops.gpu_fma_peak_gflops(peak_seconds),
    }


def machine_description(device: str, peak_seconds: float = 0.2) -> dict:
    threads = torch.get_num_threads()
    info = {
        "id": machine_id(device, threads),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": mylinearops.cpu_identity(),
        "cpu_cores": os.cpu_count(),
        "threads": threads,
        **library_versions(),
        "mylinearops": {k: v for k, v in mylinearops.build_info().items() if k != "library"},
        "os": platform.platform(),
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        info["tf32"] = torch.backends.cuda.matmul.allow_tf32
        info["gpu_details"] = gpu_description(peak_seconds)
    else:  # the CPU's caches, clock and measured ceilings, which the CPU kernels are read against
        info["mylinearops_cpu"] = mylinearops.cpu_info()
        info["clock_ghz"] = mylinearops.cpu_clock_ghz()
        info["fma_peak_gflops"] = measured_peaks(threads, peak_seconds)
        # the micro-kernel alone, one core, operands in L1, against its own 1-thread ceiling,
        # read in alternation (read apart, a busy moment for either moved their ratio by 10%)
        info["microkernel_gflops"], info["microkernel_ceiling_gflops"] = {}, {}
        for isa in mylinearops.build_info()["cpu_microkernels"]:
            best = best_of_alternating({
                "alone": lambda isa=isa: mylinearops.microkernel_gflops(isa, peak_seconds / 4),
                "ceiling": lambda isa=isa: mylinearops.fma_peak_gflops(isa, 1, peak_seconds / 4),
            })
            info["microkernel_gflops"][isa], info["microkernel_ceiling_gflops"][isa] = best["alone"], best["ceiling"]
    if commit := code_commit():
        info["git_commit"] = commit
    return info


def code_commit() -> str | None:
    """The commit of the code measured (or judging): HEAD, marked where the extension or this
    script has uncommitted changes; BENCH_GIT_COMMIT where there is no git (a copy of the tree,
    tools/gpu_check.sh)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        ext_dir = HERE.parent
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", str(ext_dir / "csrc"), str(ext_dir / "mylinearops"), str(ext_dir / "setup.py"), __file__],
            cwd=HERE, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return commit + (" with uncommitted changes to the extension" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("BENCH_GIT_COMMIT")


def best_peak(machine: dict) -> tuple[str, float]:
    """The roof: the highest measured FMA peak on the benchmark's threads, and its ISA."""
    threads = str(machine["threads"])
    isa, peaks = max(machine["fma_peak_gflops"].items(), key=lambda item: item[1][threads])
    return isa, peaks[threads]


def isa_of(variant: str, machine: dict) -> str:
    """The instruction set whose ceiling bounds a variant: the packed micro-kernel's own;
    the roof for auto and the libraries; the compiler's baseline (SSE2) for the loops."""
    if variant.startswith("packed_"):
        return variant.removeprefix("packed_")
    if variant in ("reference", "blocked"):
        return "generic"
    return best_peak(machine)[0]


# ---------------------------------------------------------------------------
# Correctness check before timing
# ---------------------------------------------------------------------------


def check(out: torch.Tensor, ref: torch.Tensor, k: int) -> float:
    """Error normalised by sqrt(k) (the scale of float32 rounding in a k-long sum)."""
    out = torch.as_tensor(out)
    err = (out.double().to(ref.device) - ref).abs().max().item() if out.numel() else 0.0
    return err / max(1.0, k) ** 0.5


TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}


# ---------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------


def forward_variants(device: str, n_flops: float, quick: bool) -> dict:
    """name -> algo ("torch.mm", "numpy" or an algo= name). Slow kernels skip big sizes."""
    if device == "cpu":
        algos = [a for a in mylinearops.available_algos("cpu") if a != "packed"]
        if n_flops > 2 * 512**3:
            algos.remove("reference")  # seconds per call beyond 512^3
        if quick:
            algos = [a for a in algos if a in ("reference", "blocked", "auto", "packed_avx2", "packed_avx512")]
        return {**{a: a for a in algos}, "torch.mm": "torch.mm", "numpy": "numpy", ROOF: ROOF}
    algos = [a for a in mylinearops.available_algos("cuda") if a != "auto"]
    return {**{a: a for a in algos}, "torch.mm": "torch.mm", ROOF: ROOF}


# The FMA-throughput loop of the roof's instruction set (the highest measured peak, which need
# not be the widest: Zen 4's AVX-512 runs on 256-bit units), run for about as many FLOPs as the
# product and timed in the same interleaved rounds: the roof under the same conditions as the
# kernels, so that a share of it compares medians with a median.
ROOF = "fma_loop"


def roof_call(flops: float, isa: str | None = None, device: str = "cpu"):
    """A call of the FMA loop doing about `flops` FLOPs, returns (fn, its FLOPs): on the CPU,
    `isa`'s loop (default: the widest this CPU runs); on a GPU, the FP32 loop of every resident
    thread (mylinearops.gpu_fma_loop)."""
    if device == "cuda":
        run, per_iteration = mylinearops.gpu_fma_loop()
        iterations = max(1, round(flops / per_iteration))
        return (lambda: run(iterations)), per_iteration * iterations
    isa = isa or mylinearops.build_info()["cpu_microkernels"][0]
    threads = torch.get_num_threads()
    per_iteration = torch.ops.mylinearops.cpu_fma_loop(isa, threads, 1)
    iterations = max(1, round(flops / per_iteration))
    return (lambda: torch.ops.mylinearops.cpu_fma_loop(isa, threads, iterations)), per_iteration * iterations


def backward_variants(device: str, n_flops: float) -> dict:
    if device == "cpu":
        # blocked reads B^T with a strided inner loop: ~1 GFLOP/s, minutes per call beyond 512^3
        slow = {"blocked": "blocked"} if n_flops <= 2 * 512**3 else {}
        return {**slow, "auto": "auto", "torch.mm": "torch.mm"}
    return {"tiled": "tiled", "register_blocked": "register_blocked", "torch.mm": "torch.mm"}


def bench_shape(device, m, k, n, kind, rounds, target_s, quick, roof_isa=None):
    """One row of results: GFLOP/s of each variant for C = A(m,k) @ B(k,n); the FMA loop
    timed beside them is roof_isa's (default: the widest ISA's)."""
    dtype = torch.float32
    A = torch.randn(m, k, device=device, dtype=dtype)
    B = torch.randn(k, n, device=device, dtype=dtype)
    ref = A.double() @ B.double()
    flops = 2.0 * m * n * k
    rows = {}
    fns = {}
    roof_flops = 0.0
    if kind == "forward":
        A_np, B_np = (A.numpy(), B.numpy()) if device == "cpu" else (None, None)
        for name, algo in forward_variants(device, flops, quick).items():
            if algo == ROOF:  # not a product: nothing to check
                fns[name], roof_flops = roof_call(flops, roof_isa, device)
                rows[name] = {}
                continue
            if algo == "torch.mm":
                fn = lambda: torch.mm(A, B)  # noqa: E731
            elif algo == "numpy":
                fn = lambda: A_np @ B_np  # noqa: E731
            else:
                fn = lambda algo=algo: mylinearops.matmul(A, B, algo=algo)  # noqa: E731
            err = check(fn(), ref, k)
            rows[name] = {"max_error_per_sqrt_k": err}
            if err > TOLERANCE[dtype]:
                rows[name]["failed_check"] = True
            else:
                fns[name] = fn
    else:  # backward: dA = dC @ B^T and dB = A^T @ dC through autograd
        flops *= 2
        Ag, Bg = A.clone().requires_grad_(), B.clone().requires_grad_()
        dC = torch.randn(m, n, device=device, dtype=dtype)
        ref_dA = dC.double() @ B.double().t()
        ref_dB = A.double().t() @ dC.double()
        for name, algo in backward_variants(device, flops / 2).items():
            out = Ag @ Bg if algo == "torch.mm" else mylinearops.matmul(Ag, Bg, algo=algo)
            fn = lambda out=out: torch.autograd.grad(out, (Ag, Bg), dC, retain_graph=True)  # noqa: E731
            dA, dB = fn()
            err = max(check(dA, ref_dA, n), check(dB, ref_dB, m))
            rows[name] = {"max_error_per_sqrt_k": err}
            if err > TOLERANCE[dtype]:
                rows[name]["failed_check"] = True
            else:
                fns[name] = fn
    per_round = interleaved_rounds(fns, rounds=rounds, seconds_per_round=target_s, device=device)
    samples = {name: sorted(s for these in rs for s in these) for name, rs in per_round.items()}
    round_medians = {name: [statistics.median(these) for these in rs] for name, rs in per_round.items()}
    medians = {name: statistics.median(ss) for name, ss in samples.items()}
    for name, ss in samples.items():
        s = medians[name]
        done = roof_flops if name == ROOF else flops
        rows[name].update(ms=s * 1e3, gflops=done / s / 1e9, best_gflops=done / ss[0] / 1e9)
        if name == ROOF:
            continue
        for base, key in (("torch.mm", "vs_torch"), ("numpy", "vs_numpy")):  # > 1: faster than the library
            if base in medians:
                rows[name][key] = medians[base] / s
        if name == "auto" and "torch.mm" in round_medians:  # how far one round's verdict can swing
            rows[name]["vs_torch_per_round"] = [
                mm / ours for mm, ours in zip(round_medians["torch.mm"], round_medians[name])
            ]
        if ROOF in medians:  # share of the FMA loop timed in the same rounds
            rows[name]["pct_of_roof_same_rounds"] = rows[name]["gflops"] / (roof_flops / medians[ROOF] / 1e9)
    return {"kind": kind, "m": m, "k": k, "n": n, "rounds": rounds, "variants": rows}


def add_peak_shares(report: dict) -> None:
    """Each CPU variant's GFLOP/s as a share of the measured roof, and of the ceiling of
    the instruction set it uses."""
    machine = report["machine"]
    if report["device"] == "cuda":  # one ceiling: the GPU's FP32 FMA loop
        roof = machine["gpu_details"]["fma_peak_gflops"]
        for row in report["results"]:
            for v in row["variants"].values():
                if "gflops" in v:
                    v["pct_of_peak"] = v["gflops"] / roof
        return
    threads = str(machine["threads"])
    roof = best_peak(machine)[1]
    for row in report["results"]:
        for name, v in row["variants"].items():
            if "gflops" not in v:
                continue
            v["pct_of_peak"] = v["gflops"] / roof
            own = machine["fma_peak_gflops"].get(isa_of(name, machine), {}).get(threads)
            if own:
                v["pct_of_isa_peak"] = v["gflops"] / own


# ---------------------------------------------------------------------------
# MLP training step
# ---------------------------------------------------------------------------


def mlp_train_step(device, rounds, steps_per_round):
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    reference = reference.to(device)
    ours = nn.Sequential(*[mylinearops.LinearLayer.from_linear(m) if isinstance(m, nn.Linear) else m for m in reference])
    x = torch.randn(128, 784, device=device)
    y = torch.randint(0, 10, (128,), device=device)

    def make_step(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    steps = {"nn.Linear": make_step(reference), "LinearLayer": make_step(ours)}
    losses = {name: [step().item() for _ in range(10)] for name, step in steps.items()}  # warm-up, same curve
    same = all(abs(a - b) < 1e-4 * abs(b) + 1e-5 for a, b in zip(losses["LinearLayer"], losses["nn.Linear"]))
    samples = {name: [] for name in steps}
    round_ratios = []  # each round's LinearLayer / nn.Linear: how far one round's verdict can swing
    for _ in range(rounds):
        this_round = {name: time_calls(step, steps_per_round, device) for name, step in steps.items()}
        for name, ss in this_round.items():
            samples[name] += ss
        round_ratios.append(statistics.median(this_round["LinearLayer"]) / statistics.median(this_round["nn.Linear"]))
    seconds = {name: statistics.median(s) for name, s in samples.items()}
    return {
        "best_ms_per_step": {name: min(s) * 1e3 for name, s in samples.items()},
        "batch": 128,
        "layers": [784, 256, 256, 10],
        "ms_per_step": {name: s * 1e3 for name, s in seconds.items()},
        "linearlayer_over_nn_linear": seconds["LinearLayer"] / seconds["nn.Linear"],
        "round_ratios": round_ratios,
        "same_loss_curve": same,
    }


# ---------------------------------------------------------------------------
# Targets and reporting
# ---------------------------------------------------------------------------


def target_set(report: dict) -> dict:
    """The targets that apply to the machine of `report`: INTEL_AVX512_TARGETS where `auto` runs
    AVX-512 on an Intel CPU, TARGETS elsewhere (and for a report that names no machine)."""
    machine = report.get("machine", {})
    intel = machine.get("cpu", {}).get("vendor") == "intel"
    avx512 = machine.get("mylinearops_cpu", {}).get("preferred_isa") == "avx512"
    return INTEL_AVX512_TARGETS if intel and avx512 else TARGETS


def cpu_targets(report: dict) -> list[dict]:
    """The CPU kernel's targets, evaluated on this run: forward FP32 1024^3 with `auto`
    against torch.mm, numpy and the measured roof, the MLP training step, and (where the
    target set has one) `auto`'s micro-kernel alone against the FMA loop timed beside it."""
    targets = target_set(report)
    out = []
    row = target_row(report)
    v = row["variants"].get("auto") if row else None
    if v and "gflops" in v:
        for key, label in [
            ("vs_torch", "auto vs torch.mm, forward 1024^3 (speed ratio)"),
            ("vs_numpy", "auto vs numpy, forward 1024^3 (speed ratio)"),
            ("pct_of_roof_same_rounds", "auto, forward 1024^3, share of the measured FMA peak (loop timed in the same rounds)"),
        ]:
            if key in v:
                target = targets["pct_of_peak" if key.startswith("pct") else key]
                out.append({"name": label, "value": v[key], "target": target, "met": v[key] >= target})
        if "pct_of_peak" in v:  # for reference: against the best of three runs before (and, newer files, after) the benchmark
            when = "3 before and 3 after the run" if "fma_peak_gflops_after" in report.get("machine", {}) else "3, before the run"
            out.append({"name": f"auto, forward 1024^3, share of the measured FMA peak (best of {when})",
                        "value": v["pct_of_peak"], "target": targets["pct_of_peak"],
                        "met": v["pct_of_peak"] >= targets["pct_of_peak"]})
    t = report.get("mlp_train_step")
    if t:
        ratio = t["linearlayer_over_nn_linear"]
        out.append({
            "name": "MLP train step, LinearLayer time / nn.Linear time",
            "value": ratio,
            "target": targets["mlp_step_time_ratio"],
            "met": ratio <= targets["mlp_step_time_ratio"],
            "at_most": True,
        })
    machine = report.get("machine", {})
    isa = machine.get("mylinearops_cpu", {}).get("preferred_isa")
    alone, ceiling = machine.get("microkernel_gflops", {}), machine.get("microkernel_ceiling_gflops", {})
    if "microkernel_share" in targets and isa in alone and isa in ceiling:
        tile = machine["mylinearops_cpu"]["blocking"][isa]  # the ISA's own tile, which the probe runs
        share = alone[isa] / ceiling[isa]
        out.append({
            "name": f"the {isa} micro-kernel ({tile['mr']}x{tile['nr']}) alone, 1 thread, data in L1,"
                    " share of the FMA loop timed in alternation",
            "value": share,
            "target": targets["microkernel_share"],
            "met": share >= targets["microkernel_share"],
        })
    return out


def format_target(t: dict) -> str:
    value = f"{t['value']:.0%}" if "share" in t["name"] else f"{t['value']:.2f}x"
    target = f"{t['target']:.0%}" if "share" in t["name"] else f"{t['target']:.2f}x"
    return f"{t['name']}: {value} (target {'<=' if t.get('at_most') else '>='} {target}): {'met' if t['met'] else 'NOT met'}"


def target_row(report: dict) -> dict | None:
    return next((r for r in report["results"] if r["kind"] == "forward" and r["m"] == r["k"] == r["n"] == TARGET_SIZE), None)


def target_rounds_words(report: dict) -> str:
    row = target_row(report)
    if row is None or row.get("rounds", report["rounds"]) == report["rounds"]:
        return ""
    return f", {row['rounds']} for the forward {TARGET_SIZE}^3 product the targets are read from"


def round_spread_words(report: dict) -> str:
    """The torch.mm ratio of `auto` at the target shape, one round at a time: how far a verdict
    drawn from fewer rounds could swing on this machine."""
    row = target_row(report)
    rr = sorted((row or {}).get("variants", {}).get("auto", {}).get("vs_torch_per_round", []))
    if len(rr) < 2:
        return ""
    return (f"auto vs torch.mm at {TARGET_SIZE}^3, per round ({len(rr)} rounds): lowest {rr[0]:.2f}x, median"
            f" {statistics.median(rr):.2f}x, highest {rr[-1]:.2f}x; {sum(r < 1 for r in rr)} of {len(rr)} rounds below 1.00x.")


def machine_label(machine: dict) -> str:
    cpu = machine["cpu"]
    core = f", {cpu['core']}" if cpu.get("core") else ""
    return f"{cpu['model_name']} (family {cpu['family']}, model {cpu['model']}{core})"


def markdown(report: dict) -> str:
    m = report["machine"]
    threads = str(m["threads"])
    lines = [f"# mylinearops matmul benchmark: {m['id']}", ""]
    lines.append(f"- date: {m['date_utc']}; mode: {'quick' if report['quick'] else 'full'}; commit {m.get('git_commit', '?')}")
    if report["device"] == "cuda":
        g = m["gpu_details"]
        lines.append(
            f"- GPU: {g['name']} (compute capability {g['compute_capability']}, {g['multiprocessors']} SMs, "
            f"{g['memory_gib']:.0f} GiB); driver {g['driver']}, CUDA {g['cuda_runtime']}, cuDNN {g['cudnn']}"
        )
        lines.append("- FP32 with TF32 off, CUDA-event timing")
        lines.append(f"- measured FP32 FMA peak (the FMA loop, best of 5): {g['fma_peak_gflops']:.0f} GFLOP/s")
        lines.append(f"- host CPU: {machine_label(m)}; {m['cpu_cores']} cores")
        lines.append(f"- torch {m['torch']}")
    else:
        cpu, caches = m["cpu"], m["mylinearops_cpu"]
        lines.append(f"- CPU: {machine_label(m)}, flags {', '.join(cpu['flags'])}; {m['cpu_cores']} cores, {threads} threads")
        lines.append(
            f"- caches (from {caches['cache_source']}): L1d {caches['l1d_bytes'] // 1024} KiB, "
            f"L2 {caches['l2_bytes'] // 1024} KiB, L3 {caches['l3_bytes'] // 2**20} MiB; measured clock {m['clock_ghz']:.2f} GHz"
        )
        lines.append(f"- torch {m['torch']} ({m['torch_blas']}; CPU capability {m['torch_cpu_capability']})")
        lines.append(f"- numpy {m['numpy']} ({m['numpy_blas']})")
        lines.append(f"- mylinearops `auto` micro-kernel: {caches['preferred_isa']} ({caches['preferred_reason']})")
        if "tuning" in caches:  # absent from files recorded before the tuning search existed
            t = caches["tuning"]
            lines.append(f"- float tile and blocks of `auto`: {t['tile']}, kc {t['kc']}, mc {t['mc']}, nc {t['nc']} ({t['reason']})")
            if "in_place_rows" in t:  # absent from files recorded before the in-place rule was searched
                rows = t["in_place_rows"]
                lines.append(f"- `auto` reads A and B in place up to {rows['row_major']} rows with a row-major A, "
                             f"{rows['column_major']} with a column-major one ({t['in_place_reason']})")
            if "share_b" in t:  # absent from files recorded before the sharing rule was searched
                verdict = "may share the panels of B they pack" if t["share_b"] else "each pack their own panels of B"
                lines.append(f"- the threads of `auto` {verdict} ({t['share_reason']})")
        alone = m.get("microkernel_gflops", {})  # absent from files recorded before it was measured
        alone_ceiling = m.get("microkernel_ceiling_gflops", {})  # measured beside it (newer files)
        lines += ["", "## Measured FP32 FMA peak (GFLOP/s)", ""]
        lines.append(
            "| instruction set | 1 thread | " + f"{threads} threads |"
            + (" micro-kernel alone, 1 thread, data in L1 |" if alone else "")
            + (" its share of the 1-thread FMA loop, timed in alternation |" if alone_ceiling else "")
        )
        lines.append("|---|---|---|" + ("---|" if alone else "") + ("---|" if alone_ceiling else ""))
        for isa, peaks in m["fma_peak_gflops"].items():
            row = f"| {isa} | {peaks['1']:.0f} | {peaks[threads]:.0f} |"
            if alone_ceiling:
                row += f" {alone[isa]:.0f} | {alone[isa] / alone_ceiling[isa]:.0%} of {alone_ceiling[isa]:.0f} |" if isa in alone else " – | – |"
            elif alone:
                row += f" {alone[isa]:.0f} ({alone[isa] / peaks['1']:.0%} of 1 thread) |" if isa in alone else " – |"
            lines.append(row)
    lines += [
        "",
        f"{report['rounds']} interleaved rounds per shape{target_rounds_words(report)}; about {report['target_ms']:.0f} ms per variant each, "
        f"{'calls timed one by one' if report['device'] == 'cpu' else 'CUDA events per round'}; medians. "
        "Cells: GFLOP/s (speed ratio to torch.mm; share of the measured roof). Every variant was checked "
        "against a float64 reference first."
        + (f" The fma_loop column is the {report['roof_isa']} FMA loop, the roof, timed in the same rounds."
           if report.get("roof_isa") else "")
        + (" The fma_loop column is the GPU's FP32 FMA loop, timed in the same rounds."
           if report["device"] == "cuda" else ""),
    ]
    for kind, title in [("forward", "Forward C = A @ B"), ("backward", "Backward dA = dC B^T, dB = A^T dC (autograd)")]:
        rows = [r for r in report["results"] if r["kind"] == kind]
        if not rows:
            continue
        names = list(rows[0]["variants"])
        for r in rows[1:]:
            names += [n for n in r["variants"] if n not in names]
        lines += ["", f"## {title}", "", "| m x k x n | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for r in rows:
            cells = []
            for name in names:
                v = r["variants"].get(name)
                if v is None:
                    cells.append("–")
                elif v.get("failed_check"):
                    cells.append("FAILED CHECK")
                else:
                    extra = [f"{v['vs_torch']:.2f}x"] if "vs_torch" in v and name != "torch.mm" else []
                    extra += [f"{v['pct_of_peak']:.0%}"] if "pct_of_peak" in v else []
                    cells.append(f"{v['gflops']:.0f}" + (f" ({'; '.join(extra)})" if extra else ""))
            lines.append(f"| {r['m']} x {r['k']} x {r['n']} | " + " | ".join(cells) + " |")
    t = report.get("mlp_train_step")
    if t:
        lines += ["", "## MLP 784-256-256-10 training step (batch 128, SGD)", "", "| model | ms / step |", "|---|---|"]
        for name, ms in t["ms_per_step"].items():
            lines.append(f"| {name} | {ms:.3f} |")
        lines += ["", f"LinearLayer / nn.Linear time: **{t['linearlayer_over_nn_linear']:.2f}x** (same loss curve: {t['same_loss_curve']})"]
        rr = sorted(t.get("round_ratios", []))
        if len(rr) > 1:  # the verdict's spread: the same ratio, one round at a time
            lines += [
                "",
                f"The same ratio per round ({len(rr)} rounds): lowest {rr[0]:.2f}x, median {statistics.median(rr):.2f}x,"
                f" highest {rr[-1]:.2f}x; {sum(r <= 1 for r in rr)} of {len(rr)} rounds at most 1.00x.",
            ]
    if report.get("targets"):
        lines += ["", "## Targets", ""]
        if judged := report.get("targets_rejudged"):
            lines += [(f"Judged on {judged['date_utc']} by the benchmark at commit {judged['commit']}, from the"
                       " measurements above (`--rejudge`: the targets changed after this run)."), ""]
        lines += [f"- {format_target(t)}" for t in report["targets"]]
        spread = round_spread_words(report)
        if spread:
            lines += ["", spread]
    return "\n".join(lines) + "\n"


def run_device(device: str, quick: bool) -> dict:
    rounds = 3 if quick else 7
    target_s = 0.02 if quick else 0.05
    if device == "cpu":
        sizes = [256, 512] if quick else [256, 512, 1024, 2048]
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        sizes = [512, 1024] if quick else [256, 512, 1024, 2048, 4096, 8192]
    peak_seconds = 0.05 if quick else 0.2
    machine = machine_description(device, peak_seconds)
    if device == "cuda":
        g = machine["gpu_details"]
        print(f"[cuda] {machine['id']}: {g['name']}, driver {g['driver']}, CUDA {g['cuda_runtime']}; "
              f"measured FP32 FMA peak {g['fma_peak_gflops']:.0f} GFLOP/s", flush=True)
    else:
        print(f"[{device}] {machine['id']}: {machine_label(machine)}; measured FMA peak (GFLOP/s, threads): "
              + ", ".join(f"{isa} {peaks}" for isa, peaks in machine["fma_peak_gflops"].items()), flush=True)
        tuning = machine["mylinearops_cpu"]["tuning"]
        print(f"[cpu] auto's float tile {tuning['tile']}, mc {tuning['mc']}: {tuning['reason']}", flush=True)
        print(f"[cpu] auto's in-place rows {tuning['in_place_rows']}: {tuning['in_place_reason']}", flush=True)
        print(f"[cpu] auto's threads share B: {tuning['share_b']}: {tuning['share_reason']}", flush=True)
    results = []
    roof_isa = best_peak(machine)[0] if device == "cpu" else None
    shapes = [(s, s, s) for s in sizes] + [(b, i, o) for b, i, o in MLP_SHAPES]
    for kind in ("forward", "backward"):
        for m, k, n in shapes:
            # The shape the CPU targets are read from gets three times the rounds: on a shared
            # machine, identical code timed twice in one run differs by a few percent.
            is_target_shape = device == "cpu" and kind == "forward" and m == k == n == TARGET_SIZE
            shape_rounds = rounds * TARGET_SHAPE_ROUND_FACTOR if is_target_shape and not quick else rounds
            row = bench_shape(device, m, k, n, kind, shape_rounds, target_s, quick, roof_isa)
            results.append(row)
            summary = "  ".join(
                f"{name} {v['gflops']:.0f}" + (f" ({v['vs_torch']:.2f}x)" if "vs_torch" in v and name != "torch.mm" else "")
                if "gflops" in v else f"{name} FAILED CHECK"
                for name, v in row["variants"].items()
            )
            print(f"[{device}] {kind:8s} {m}x{k}x{n}: {summary}", flush=True)
    train = mlp_train_step(device, rounds=5 if quick else 15, steps_per_round=10 if quick else 20)
    print(
        f"[{device}] MLP train step: LinearLayer {train['ms_per_step']['LinearLayer']:.3f} ms, "
        f"nn.Linear {train['ms_per_step']['nn.Linear']:.3f} ms -> {train['linearlayer_over_nn_linear']:.2f}x",
        flush=True,
    )
    if device == "cpu":
        machine["fma_peak_gflops_after"] = measured_peaks(machine["threads"], peak_seconds)
        machine["fma_peak_gflops"] = higher_peaks(machine["fma_peak_gflops"], machine["fma_peak_gflops_after"])
    report = {
        "format": FORMAT,
        "device": device,
        "quick": quick,
        "rounds": rounds,
        "target_ms": target_s * 1e3,
        "machine": machine,
        "results": results,
        "mlp_train_step": train,
    }
    if device == "cuda":
        add_peak_shares(report)
    if device == "cpu":
        report["roof_isa"] = roof_isa
        add_peak_shares(report)
        report["targets"] = cpu_targets(report)
        for t in report["targets"]:
            print(f"[{device}] target: {format_target(t)}", flush=True)
        if spread := round_spread_words(report):
            print(f"[{device}] {spread}", flush=True)
    if hasattr(os, "getloadavg"):  # other work on the machine skews every number
        report["machine"]["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    return report


def rejudge(path: Path) -> dict:
    """A recorded CPU run judged against the current targets: the measurements stay as they
    were, the verdicts and the commit that judged them are rewritten (json and md)."""
    report = json.loads(path.read_text())
    if report.get("device") != "cpu" or "machine" not in report:
        raise SystemExit(f"{path}: --rejudge reads a CPU results file of this benchmark")
    report["targets"] = cpu_targets(report)
    report["targets_rejudged"] = {
        "commit": code_commit() or "unknown",
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds (about a minute)")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--out-dir", type=Path, help="default: bench/results (full) or bench/_scratch (quick)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch, mylinearops and numpy (default: all cores)")
    parser.add_argument("--rejudge", type=Path, nargs="+", metavar="FILE",
                        help="judge recorded CPU results files against the current targets, without measuring")
    args = parser.parse_args(argv)
    if args.rejudge:
        for path in args.rejudge:
            for t in rejudge(path)["targets"]:
                print(f"[{path.stem}] target: {format_target(t)}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    out_dir = args.out_dir or (HERE / ("_scratch" if args.quick else "results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            print("no CUDA GPU visible", file=sys.stderr)
            return 1
        devices.remove("cuda")
    torch.manual_seed(0)
    for device in devices:
        report = run_device(device, args.quick)
        stem = out_dir / report["machine"]["id"]
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown(report))
        print(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
