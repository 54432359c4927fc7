"""What the CPU kernels know and measure about the machine they run on.

The packed CPU kernel adapts to the running CPU instead of carrying constants
tuned on one: cache sizes come from the operating system, the micro-kernel's
instruction set from a measurement, and the compute ceiling of each
instruction set is measured too. These functions expose all of that:

    mylinearops.cpu_info()                 # caches, preferred micro-kernel and why, cache blocks
    mylinearops.tuning_info()              # the float tile and blocks `packed` measured to be fastest
    mylinearops.fma_peak_gflops("avx2", 2) # measured FP32 FMA throughput on 2 threads
    mylinearops.microkernel_gflops("avx2") # the micro-kernel alone, one core, data in L1
    mylinearops.cpu_clock_ghz()            # measured clock of a busy core
    mylinearops.last_gemm_plan()           # what the last `packed` product on this thread did
    mylinearops.cpu_identity()             # vendor, family, model, core name, vector flags
    mylinearops.gpu_fma_peak_gflops()      # measured FP32 FMA throughput of the current GPU

Environment switches (read once per process, before the first product):

``MYLINEAROPS_ISA``       ``auto`` (default), ``avx512``, ``avx2`` or ``generic``: the widest
                          instruction set the CPU kernels may use. ``avx2`` makes an AVX-512
                          CPU behave like one without it (like PyTorch's ATEN_CPU_CAPABILITY).
``MYLINEAROPS_BLOCKING``  ``kc,mc,nc``: replace the cache blocks derived from the caches
                          (for experiments).
``MYLINEAROPS_PACK``      ``auto`` (default), ``always`` or ``never``: override the rule for what
                          the packed kernel packs (for experiments; the results do not change).
``MYLINEAROPS_TILE``      a float tile of the instruction set in use (``12x32``, ``8x48``): skip
                          the tuning search and use it (the results do not change).
``MYLINEAROPS_TUNING``    ``on`` (default) or ``off``: whether the first float product times a few
                          tiles and row blocks and keeps the fastest (the results do not change).
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Callable

import torch

__all__ = [
    "cpu_clock_ghz",
    "cpu_identity",
    "cpu_info",
    "fma_peak_gflops",
    "gpu_driver_version",
    "gpu_fma_loop",
    "gpu_fma_peak_gflops",
    "last_gemm_plan",
    "machine_id",
    "microkernel_gflops",
    "tuning_info",
]

_ops = torch.ops.mylinearops


def _parse(text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in text.split(";"):
        key, _, value = item.partition("=")
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def cpu_info() -> dict[str, object]:
    """Cache sizes (bytes) and their source, L1d's set span (``l1d_set_span_bytes``: sets x line
    size, the distance after which addresses share an L1 set), the MYLINEAROPS_ISA cap, the micro-kernel
    `packed` prefers and why, and each micro-kernel's register tile and cache blocks
    (``blocking["avx2"] == {"mr": 6, "nr": 16, "kc": ..., "mc": ..., "nc": ...}``, float32)."""
    raw = _parse(_ops.cpu_info())
    info: dict[str, object] = {k: v for k, v in raw.items() if not k.startswith(("blocking_", "tuning_"))}
    info["blocking"] = {
        key.removeprefix("blocking_"): dict(zip(("mr", "nr", "kc", "mc", "nc"), map(int, str(value).split(","))))
        for key, value in raw.items()
        if key.startswith("blocking_")
    }
    tuning = {key.removeprefix("tuning_"): value for key, value in raw.items() if key.startswith("tuning_")}
    tuning["reason"] = str(tuning["reason"])
    tuning["candidates"] = [
        {"tile": tile, "kc": int(kc), "mc": int(mc), "nc": int(nc), "median_seconds": float(median),
         "same_result": same == "1", "wins": int(wins), "noise_chance": float(chance), "row_block": int(row_block)}
        for tile, kc, mc, nc, median, same, wins, chance, row_block in (
            item.split("/") for item in str(tuning["candidates"]).split(",") if item
        )
    ]
    tuning["in_place_rows"] = dict(zip(("row_major", "column_major"), map(int, str(tuning["in_place_rows"]).split(","))))
    tuning["in_place_reason"] = str(tuning["in_place_reason"])
    tuning["in_place_trials"] = [
        {"a_layout": layout, "rows": int(rows), "packed_seconds": float(packed), "in_place_seconds": float(in_place),
         "wins": int(wins), "rounds": int(rounds), "same_result": same == "1"}
        for layout, rows, packed, in_place, wins, rounds, same in (item.split("/") for item in str(tuning["in_place_trials"]).split(",") if item)
    ]
    tuning["share_b"] = tuning["share_b"] == 1
    tuning["share_reason"] = str(tuning["share_reason"])
    shared, own, wins, rounds, same = str(tuning["share_trial"]).split("/")
    tuning["share_trial"] = {"shared_seconds": float(shared), "own_seconds": float(own), "wins": int(wins),
                             "rounds": int(rounds), "same_result": same == "1"}
    info["tuning"] = tuning
    return info


def tuning_info() -> dict[str, object]:
    """The float tile and cache blocks `packed` picked here, and why: ``isa``, ``tile`` ("12x32"),
    ``kc``, ``mc``, ``nc``, ``reason``, the search's ``seconds`` and timed ``rounds``, and the
    ``candidates`` it timed (tile, blocks, median seconds per product, whether its result
    was bit for bit the default's, ``wins``: in how many rounds it beat the default, the
    two timed in the same round, and ``noise_chance``: the chance that a fair coin per round
    wins as often, the sign test the search applies; ``row_block``: the rows a thread took at a
    time in the search's product, equal to ``mc`` on one thread and smaller on several, where
    candidates that would run the same blocks are timed once). ``threads``: the thread count it
    is for, the one products started now would run on (``torch.get_num_threads()``, or 1 inside a
    parallel region). Searched once per process and thread count, at the first float product on
    that count or the first call of this (csrc/cpu/tuning.cpp); MYLINEAROPS_TILE, MYLINEAROPS_BLOCKING and
    MYLINEAROPS_TUNING=off override it. The pick is for products that every tile covers
    without padding; a product of another shape takes the searched tile that would be fastest
    on it (``last_gemm_plan()`` says which ran).

    Then the rule for what to pack: ``in_place_rows`` (``{"row_major": 255, "column_major": 255}``
    by default) is up to how many rows a product reads A and B in place rather than packing
    them, per layout of A, and ``in_place_reason`` says why; ``in_place_trials`` lists the
    products it timed (``a_layout``, ``rows``, median ``packed_seconds`` and ``in_place_seconds``
    per product, ``wins`` of reading in place in ``rounds``, ``same_result``). Under
    MYLINEAROPS_TUNING=off, or a MYLINEAROPS_PACK other than auto, it is not searched.

    Last, the sharing rule: ``share_b`` (True by default) is whether a product's threads may
    split its rows and share the panels of B they pack, rather than each computing columns of
    its own and packing their panels itself, and ``share_reason`` says why; ``share_trial`` is
    its timing (median ``shared_seconds`` and ``own_seconds`` per product, ``wins`` of packing
    its own in ``rounds``, 0 when not run, ``same_result``). Under MYLINEAROPS_TUNING=off, or on
    one thread, it is not searched."""
    return cpu_info()["tuning"]


def fma_peak_gflops(isa: str, threads: int | None = None, seconds: float = 0.05) -> float:
    """Measured FP32 GFLOP/s of a loop of independent vector FMAs using `isa` ("avx512",
    "avx2" or "generic") on `threads` threads (default: torch.get_num_threads()), best of
    three runs of about `seconds` each: the compute ceiling of that instruction set here."""
    return _ops.cpu_fma_peak(isa, torch.get_num_threads() if threads is None else threads, seconds)


def microkernel_gflops(isa: str, seconds: float = 0.05) -> float:
    """Measured FP32 GFLOP/s of the float micro-kernel of `isa` alone, on one core, with its
    operands in L1 (the calibration's probe), best of three runs of about `seconds` each.
    Against ``fma_peak_gflops(isa, 1)`` it says how much of the gap to the ceiling is the
    micro-kernel's own instruction stream, before caches, packing and threads."""
    return _ops.cpu_microkernel_gflops(isa, seconds)


def gpu_driver_version() -> str:
    """The NVIDIA driver's release (e.g. "580.159.04"), from nvidia-smi; "unknown" without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def gpu_fma_loop(device: torch.device | str | int | None = None) -> tuple[Callable[[int], int], int]:
    """A call of the GPU's FP32 FMA-throughput loop (csrc/cuda/fma_loop.cu) sized to fill
    `device` (default: the current GPU), and the FLOPs of one iteration of it: ``(run, flops)``
    where ``run(iterations)`` launches the loop on the current stream and returns its FLOPs.
    One thread per slot the GPU can keep resident (SMs x threads per SM)."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"mylinearops.gpu_fma_loop: device must be a CUDA device, got {device}")
    props = torch.cuda.get_device_properties(device)
    threads = props.multi_processor_count * getattr(props, "max_threads_per_multi_processor", 2048)
    out = torch.empty(threads, device=device)
    return (lambda iterations: _ops.cuda_fma_loop(out, iterations)), _ops.cuda_fma_loop(out, 1)


def gpu_fma_peak_gflops(seconds: float = 0.05, device: torch.device | str | int | None = None, repeats: int = 5) -> float:
    """Measured FP32 GFLOP/s of the GPU's FMA loop (independent chains of fused multiply-adds
    in every resident thread), the best of `repeats` runs of about `seconds` each, timed with
    CUDA events: the GPU's FP32 ceiling, with whatever clock it runs at under that load."""
    if not 0 < seconds <= 10:
        raise ValueError(f"mylinearops.gpu_fma_peak_gflops: seconds must be in (0, 10], got {seconds}")
    run, per_iteration = gpu_fma_loop(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(iterations: int) -> float:
        start.record()
        flops = run(iterations)
        end.record()
        end.synchronize()
        return flops / (start.elapsed_time(end) / 1e3)

    iterations = 64
    while True:  # grow the loop until one run takes a tenth of `seconds`, then size it
        rate = timed(iterations)
        elapsed = per_iteration * iterations / rate
        if elapsed >= seconds / 10 or iterations >= 1 << 30:
            break
        iterations *= 8
    iterations = max(1, round(iterations * seconds / elapsed))
    return max(timed(iterations) for _ in range(repeats)) / 1e9


def cpu_clock_ghz(seconds: float = 0.02) -> float:
    """Measured clock of one busy core, in GHz (0.0 where it cannot be measured)."""
    return _ops.cpu_clock_ghz(seconds)


def last_gemm_plan() -> dict[str, object]:
    """What the last `packed` (or `auto`) CPU product on this thread did: micro-kernel,
    cache blocks, thread grid, the rows of C a thread takes at a time (``row_block``: the
    threads that share panels of B take such blocks as they finish, and smaller ones near the
    end; ``row_blocks_taken``: how many, by all threads in all k blocks), whether A and B were
    packed, whether a ragged last panel of columns was computed in place with masked loads
    and stores (``partial_tiles``, AVX-512's tiles), how many elements of A and B were
    copied into panels, and how many cache lines of packed B the micro-kernels pulled toward
    L2 before the calls that read them (``b_lines_prefetched``)."""
    plan = _parse(_ops.cpu_last_gemm_plan())
    for key in ("pack_a", "pack_b", "partial_tiles"):
        plan[key] = bool(plan[key])
    return plan


# AMD's family/model numbering of its cores (family 17h: Zen to Zen 2, 19h: Zen 3 and
# Zen 4, 1Ah: Zen 5), for labels only: no kernel decision is derived from it.
_AMD_CORES = [
    (0x17, range(0x00, 0x30), "Zen / Zen+"),
    (0x17, range(0x30, 0x100), "Zen 2"),
    (0x19, range(0x00, 0x10), "Zen 3"),
    (0x19, range(0x10, 0x20), "Zen 4"),
    (0x19, range(0x20, 0x60), "Zen 3"),
    (0x19, range(0x60, 0x80), "Zen 4"),
    (0x19, range(0xA0, 0xB0), "Zen 4"),
    (0x1A, range(0x00, 0x100), "Zen 5"),
]
_VECTOR_FLAGS = ("sse2", "avx", "fma", "avx2", "avx512f", "avx512vl", "avx512bw", "avx512_bf16", "amx_tile")


def cpu_identity() -> dict[str, object]:
    """The CPU as /proc/cpuinfo describes its first processor: vendor ("amd", "intel"),
    family, model, stepping, model name, the core's name where known (AMD: "Zen 4"...) and
    its vector-instruction flags. Two CPUs with the same flags can differ twofold in peak
    (Zen 4 runs AVX-512 on 256-bit units, Zen 5 on 512-bit ones): family and model tell
    them apart, the flags do not."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(fields.get("vendor_id", ""), platform.machine())
    family, model = int(fields.get("cpu family", 0) or 0), int(fields.get("model", 0) or 0)
    flags = set(fields.get("flags", "").split())
    core = next((name for fam, models, name in _AMD_CORES if vendor == "amd" and fam == family and model in models), None)
    return {
        "vendor": vendor,
        "family": family,
        "model": model,
        "stepping": int(fields.get("stepping", 0) or 0),
        "model_name": fields.get("model name", platform.processor()),
        "core": core,
        "flags": [flag for flag in _VECTOR_FLAGS if flag in flags],
    }


def machine_id(threads: int | None = None) -> str:
    """A short name for this CPU and thread count, e.g. "cpu-amd-f25-m1-2t": the name of
    its benchmark results file, so that no run overwrites another machine's results."""
    cpu = cpu_identity()
    return f"cpu-{cpu['vendor']}-f{cpu['family']}-m{cpu['model']}-{threads or torch.get_num_threads()}t"
