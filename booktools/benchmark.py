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


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn: Callable[[], object], calls: int, device: str = "cpu") -> list[float]:
    """Seconds per call of fn: one sample per call on the CPU, one per batch on a GPU."""
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return [start.elapsed_time(end) / 1e3 / calls]
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def interleaved_medians(fns: dict[str, Callable[[], object]], *, rounds: int = 5, seconds_per_round: float = 0.02,
                        device: str = "cpu", max_calls: int = 1000) -> dict[str, float]:
    """Median seconds per call of each fn, measured in interleaved rounds.

    Each fn is called once to warm up, then each round calls every fn about
    `seconds_per_round` worth of times (at least once).
    """
    calls = {}
    for name, fn in fns.items():
        fn()  # warm-up: first-call allocations, lazy initialisation, caches
        _sync(device)
        once = min(statistics.median(time_calls(fn, 1, device)) for _ in range(2))
        calls[name] = max(1, min(max_calls, int(seconds_per_round / max(once, 1e-7))))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name] += time_calls(fn, calls[name], device)
    return {name: statistics.median(s) for name, s in samples.items()}


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
