"""Timing for the kernel chapters: interleaved rounds, medians, GFLOP/s and a simple roofline.

(The compute ceilings and the clock are measured by the extension itself:
`mylinearops.fma_peak_gflops`, `mylinearops.cpu_clock_ghz`.)

A single timing on a shared, noisy 2-core machine says little. `interleaved_medians` runs every
variant once per round, so a burst of load from another process hits all variants alike, and
reports the median over rounds. On the CPU every call is timed on its own (an OpenMP region
that waits for a descheduled thread then shows up as one outlier, which the median ignores,
instead of being smeared into an average); on a GPU, CUDA events time a batch of calls.

Timings differ from run to run: print them only in cells tagged `nbval-ignore-output`.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


# Before each batch of CPU calls: time for the worker threads of the library timed before
# (OpenMP's for torch and mylinearops, OpenBLAS's for numpy), which spin for a while after a
# call, to go to sleep and leave the cores to the next one.
SETTLE_S = 0.005


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn: Callable[[], object], calls: int, device: str = "cpu", settle_s: float = SETTLE_S) -> list[float]:
    """Seconds per call of fn: one sample per call on the CPU (after `settle_s` of sleep), one
    per batch on a GPU (CUDA events around the batch)."""
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return [start.elapsed_time(end) / 1e3 / calls]
    if settle_s:
        time.sleep(settle_s)
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def interleaved_rounds(fns: dict[str, Callable[[], object]], *, rounds: int = 5, seconds_per_round: float = 0.02,
                       device: str = "cpu", max_calls: int = 1000) -> dict[str, list[list[float]]]:
    """Seconds per call of each fn, round by round: ``result[name][r]`` holds round r's samples.

    Each fn is called once to warm up and timed three times alone to size its rounds; then
    every round calls every fn about `seconds_per_round` worth of times (at least once).
    """
    calls = {}
    for name, fn in fns.items():
        fn()  # warm-up: first-call allocations, lazy initialisation, caches
        _sync(device)
        once = min(statistics.median(time_calls(fn, 1, device)) for _ in range(3))
        calls[name] = max(1, min(max_calls, int(seconds_per_round / max(once, 1e-7))))
    per_round: dict[str, list[list[float]]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            per_round[name].append(time_calls(fn, calls[name], device))
    return per_round


def interleaved_medians(fns: dict[str, Callable[[], object]], **kwargs) -> dict[str, float]:
    """Median seconds per call of each fn over all its samples of `interleaved_rounds` (same
    keyword arguments)."""
    per_round = interleaved_rounds(fns, **kwargs)
    return {name: statistics.median([s for samples in rounds for s in samples]) for name, rounds in per_round.items()}


def best_of_alternating(measures: dict[str, Callable[[], float]], rounds: int = 5) -> dict[str, float]:
    """The highest of `rounds` readings of each measurement (a speed: higher is better), the
    measurements taken in alternation so that all of them meet the same load from other jobs.
    For a speed on one core, such as a micro-kernel against its own FMA ceiling: its best is
    what the core can do, and a busy moment slows one reading, not the comparison."""
    best = dict.fromkeys(measures, 0.0)
    for _ in range(rounds):
        for name, measure in measures.items():
            best[name] = max(best[name], measure())
    return best


def matmul_flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of an (m, k) @ (k, n) product: one multiply and one add per term."""
    return 2 * m * k * n


def matmul_intensity(m: int, k: int, n: int, bytes_per_element: int = 4) -> float:
    """FLOPs per byte if A and B are read once and C written once: the best any kernel can do."""
    return matmul_flops(m, k, n) / (bytes_per_element * (m * k + k * n + m * n))


def copy_bandwidth(megabytes: int = 256, rounds: int = 5) -> float:
    """Bytes per second of a large tensor copy (read + write counted), median of `rounds` copies."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages once
    seconds = interleaved_medians({"copy": lambda: dst.copy_(src)}, rounds=rounds, seconds_per_round=0.0)
    return 2 * src.numel() * 4 / seconds["copy"]
