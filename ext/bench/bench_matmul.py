"""Benchmark the mylinearops kernels against torch.mm (MKL / cuBLAS).

    python ext/bench/bench_matmul.py            # full run, writes ext/bench/results/
    python ext/bench/bench_matmul.py --quick    # a minute or so, writes ext/bench/_scratch/

For every device present (CPU always, CUDA when a GPU is visible) it measures
GFLOP/s of each kernel variant and of torch.mm on square sizes and on the
shapes of the notes' MLP (batch 128: 784->256, 256->256, 256->10), forward
and backward, then the time of one training step of that MLP built from
LinearLayer vs nn.Linear. Every variant is first checked against a float64
reference; a variant that fails the check is reported and not timed.
Timings are interleaved (each round runs every variant once) and the median
over rounds is reported, because these machines are noisy. On a GPU: FP32
with TF32 off, timed with CUDA events.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

import mylinearops

HERE = Path(__file__).resolve().parent
MLP_SHAPES = [(128, 784, 256), (128, 256, 256), (128, 256, 10)]  # (batch, in, out)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


class Timer:
    """Seconds per call of fn.

    CPU: every call is timed on its own. On a shared 2-core machine an
    OpenMP parallel region now and then waits milliseconds for a thread that
    another process has descheduled; timing calls one by one keeps those
    stalls as outliers (which the median ignores) instead of smearing them
    into an average. CUDA: CUDA events around a batch of calls.
    """

    def __init__(self, device: str):
        self.device = device

    def samples(self, fn, inner: int) -> list[float]:
        if self.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return [start.elapsed_time(end) / 1e3 / inner]
        out = []
        for _ in range(inner):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    def __call__(self, fn, inner: int) -> float:
        return statistics.median(self.samples(fn, inner))


def interleaved_medians(fns: dict, timer: Timer, rounds: int, target_s: float) -> dict[str, list[float]]:
    """Seconds per call for each fn, all samples sorted (median = the middle
    one). Every round runs every fn, so a burst of load from other processes
    hits all variants alike."""
    inner = {}
    for name, fn in fns.items():  # warm up, and size each round to about target_s per fn
        fn()
        once = min(timer(fn, 1) for _ in range(3))
        inner[name] = max(1, min(1000, int(target_s / max(once, 1e-7))))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name] += timer.samples(fn, inner[name])
    return {name: sorted(s) for name, s in samples.items()}


# ---------------------------------------------------------------------------
# Correctness check before timing
# ---------------------------------------------------------------------------


def check(out: torch.Tensor, ref: torch.Tensor, k: int) -> float:
    """Error normalised by sqrt(k) (the scale of float32 rounding in a k-long sum)."""
    err = (out.double() - ref).abs().max().item() if out.numel() else 0.0
    return err / max(1.0, k) ** 0.5


TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}


# ---------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------


def forward_variants(device: str, n_flops: float, quick: bool) -> dict:
    """name -> algo (None: torch.mm). The slow kernels are skipped on big sizes."""
    if device == "cpu":
        algos = [a for a in mylinearops.available_algos("cpu") if a not in ("auto", "packed")]
        if n_flops > 2 * 512**3:
            algos.remove("reference")  # seconds per call beyond 512^3
        if quick:
            algos = [a for a in algos if a in ("reference", "blocked", "packed_avx2", "packed_avx512")]
    else:
        algos = [a for a in mylinearops.available_algos("cuda") if a != "auto"]
    return {**{a: a for a in algos}, "torch.mm": None}


def backward_variants(device: str, n_flops: float) -> dict:
    if device == "cpu":
        # blocked reads B^T with a strided inner loop: ~1 GFLOP/s, minutes per call beyond 512^3
        slow = {"blocked": "blocked"} if n_flops <= 2 * 512**3 else {}
        return {**slow, "packed": "packed", "torch.mm": None}
    return {"tiled": "tiled", "register_blocked": "register_blocked", "torch.mm": None}


def bench_shape(device, m, k, n, kind, rounds, target_s, quick, timer):
    """One row of results: GFLOP/s of each variant for C = A(m,k) @ B(k,n)."""
    dtype = torch.float32
    A = torch.randn(m, k, device=device, dtype=dtype)
    B = torch.randn(k, n, device=device, dtype=dtype)
    ref = (A.double() @ B.double()).to(device)
    flops = 2.0 * m * n * k
    rows = {}
    if kind == "forward":
        variants = forward_variants(device, flops, quick)
        fns = {}
        for name, algo in variants.items():
            fn = (lambda: torch.mm(A, B)) if algo is None else (lambda algo=algo: mylinearops.matmul(A, B, algo=algo))
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
        ref_dA = (dC.double() @ B.double().t()).to(device)
        ref_dB = (A.double().t() @ dC.double()).to(device)
        fns = {}
        for name, algo in backward_variants(device, flops / 2).items():
            out = Ag @ Bg if algo is None else mylinearops.matmul(Ag, Bg, algo=algo)
            fn = lambda out=out: torch.autograd.grad(out, (Ag, Bg), dC, retain_graph=True)  # noqa: E731
            dA, dB = fn()
            err = max(check(dA, ref_dA, n), check(dB, ref_dB, m))
            rows[name] = {"max_error_per_sqrt_k": err}
            if err > TOLERANCE[dtype]:
                rows[name]["failed_check"] = True
            else:
                fns[name] = fn
    samples = interleaved_medians(fns, timer, rounds, target_s)
    base = statistics.median(samples["torch.mm"]) if "torch.mm" in samples else None
    for name, ss in samples.items():
        s = statistics.median(ss)
        rows[name].update(
            ms=s * 1e3,
            gflops=flops / s / 1e9,
            vs_torch=(base / s) if base else None,
            best_gflops=flops / ss[0] / 1e9,  # fastest sample: least disturbed by other load
        )
    return {"kind": kind, "m": m, "k": k, "n": n, "variants": rows}


# ---------------------------------------------------------------------------
# MLP training step
# ---------------------------------------------------------------------------


def mlp_train_step(device, rounds, steps_per_round, timer):
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
    for _ in range(rounds):
        for name, step in steps.items():
            samples[name] += timer.samples(step, steps_per_round)
    seconds = {name: statistics.median(s) for name, s in samples.items()}
    return {
        "best_ms_per_step": {name: min(s) * 1e3 for name, s in samples.items()},
        "batch": 128,
        "layers": [784, 256, 256, 10],
        "ms_per_step": {name: s * 1e3 for name, s in seconds.items()},
        "linearlayer_over_nn_linear": seconds["LinearLayer"] / seconds["nn.Linear"],
        "same_loss_curve": same,
    }


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def machine_description(device: str) -> dict:
    info = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "mylinearops": {k: v for k, v in mylinearops.build_info().items() if k != "library"},
        "os": platform.platform(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    info["cpu_cores"] = os.cpu_count()
    if hasattr(os, "getloadavg"):  # other work on the machine skews every number
        info["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    blas = [line.strip() for line in torch.__config__.show().splitlines() if "Math Kernel" in line or "BLAS" in line]
    info["torch_blas"] = blas[0].lstrip("- ") if blas else "unknown"
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        info["tf32"] = torch.backends.cuda.matmul.allow_tf32
    try:
        info["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# mylinearops matmul benchmark: {report['device'].upper()}", ""]
    lines.append(f"- date: {m['date_utc']}; mode: {'quick' if report['quick'] else 'full'}")
    if report["device"] == "cuda":
        lines.append(f"- GPU: {m['gpu']} (CUDA {m['cuda']}), FP32 with TF32 off, CUDA-event timing")
    lines.append(f"- CPU: {m['cpu']}, {m['cpu_cores']} cores, torch threads: {m['torch_threads']}")
    lines.append(f"- torch {m['torch']} ({m['torch_blas']}; CPU capability {m['torch_cpu_capability']})")
    if "load_average_1_5_15min" in m:
        lines.append(f"- load average at the end of the run (1/5/15 min): {m['load_average_1_5_15min']}")
    lines.append(f"- mylinearops micro-kernels available: {', '.join(m['mylinearops']['cpu_microkernels'])}")
    lines.append(
        f"- {report['rounds']} interleaved rounds per shape (each about {report['target_ms']:.0f} ms per variant, "
        f"{'calls timed one by one' if report['device'] == 'cpu' else 'CUDA events per round'}), median reported; "
        "cells are GFLOP/s (speed-up over torch.mm); every variant checked against a float64 reference first"
    )
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
                    ratio = f" ({v['vs_torch']:.2f}x)" if v.get("vs_torch") and name != "torch.mm" else ""
                    cells.append(f"{v['gflops']:.0f}{ratio}")
            lines.append(f"| {r['m']} x {r['k']} x {r['n']} | " + " | ".join(cells) + " |")
    headline = headline_ratios(report)
    if headline:
        lines += ["", "## Headline speed-ups (> 1: faster than torch)", "", "| comparison | median | fastest sample |", "|---|---|---|"]
        for name, (median, best) in headline.items():
            lines.append(f"| {name} | {median:.2f}x | {best:.2f}x |")
    t = report.get("mlp_train_step")
    if t:
        lines += [
            "",
            "## MLP 784-256-256-10 training step (batch 128, SGD)",
            "",
            "| model | ms / step |",
            "|---|---|",
        ]
        for name, ms in t["ms_per_step"].items():
            lines.append(f"| {name} | {ms:.3f} |")
        lines += [
            "",
            f"LinearLayer / nn.Linear time: **{t['linearlayer_over_nn_linear']:.2f}x** "
            f"(same loss curve: {t['same_loss_curve']})",
        ]
    return "\n".join(lines) + "\n"


def headline_ratios(report: dict) -> dict[str, tuple[float, float]]:
    """The targets: speed-ups over torch (>1 is faster) at the largest square
    size and for the MLP step, from the median and from the fastest round."""
    out = {}
    fwd = [r for r in report["results"] if r["kind"] == "forward" and r["m"] == r["k"] == r["n"]]
    best_name = "register_blocked" if report["device"] == "cuda" else "packed_avx512"
    for r in fwd:
        v, t = r["variants"].get(best_name) or r["variants"].get("packed_avx2"), r["variants"].get("torch.mm")
        if v and t and "gflops" in v and r["m"] in (1024, 4096):
            out[f"{best_name} vs torch.mm, forward {r['m']}^3"] = (v["vs_torch"], v["best_gflops"] / t["best_gflops"])
    t = report.get("mlp_train_step")
    if t:
        out["MLP train step: nn.Linear time / LinearLayer time"] = (
            t["ms_per_step"]["nn.Linear"] / t["ms_per_step"]["LinearLayer"],
            t["best_ms_per_step"]["nn.Linear"] / t["best_ms_per_step"]["LinearLayer"],
        )
    return out


def run_device(device: str, quick: bool) -> dict:
    timer = Timer(device)
    rounds = 3 if quick else 7
    target_s = 0.02 if quick else 0.05
    if device == "cpu":
        sizes = [256, 512] if quick else [256, 512, 1024, 2048]
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        sizes = [512, 1024] if quick else [256, 512, 1024, 2048, 4096]
    results = []
    shapes = [(s, s, s) for s in sizes] + [(b, i, o) for b, i, o in MLP_SHAPES]
    for kind in ("forward", "backward"):
        for m, k, n in shapes:
            row = bench_shape(device, m, k, n, kind, rounds, target_s, quick, timer)
            results.append(row)
            summary = "  ".join(
                f"{name} {v['gflops']:.0f}" + (f" ({v['vs_torch']:.2f}x)" if v.get("vs_torch") and name != "torch.mm" else "")
                if "gflops" in v else f"{name} FAILED CHECK"
                for name, v in row["variants"].items()
            )
            print(f"[{device}] {kind:8s} {m}x{k}x{n}: {summary}", flush=True)
    train = mlp_train_step(device, rounds=5 if quick else 11, steps_per_round=10 if quick else 20, timer=timer)
    print(
        f"[{device}] MLP train step: LinearLayer {train['ms_per_step']['LinearLayer']:.3f} ms, "
        f"nn.Linear {train['ms_per_step']['nn.Linear']:.3f} ms -> {train['linearlayer_over_nn_linear']:.2f}x",
        flush=True,
    )
    return {
        "device": device,
        "quick": quick,
        "rounds": rounds,
        "target_ms": target_s * 1e3,
        "machine": machine_description(device),
        "results": results,
        "mlp_train_step": train,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds (about a minute)")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--out-dir", type=Path, help="default: bench/results (full) or bench/_scratch (quick)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's, all cores); adds a suffix to the file names")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    suffix = f"_{args.threads}threads" if args.threads else ""
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
        stem = out_dir / f"matmul_{device}{suffix if device == 'cpu' else ''}"
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown(report))
        print(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
