"""Which operators a call runs, in call order, from torch.profiler: no timings, so the printed
tree is the same on every run and can be compared by nbval."""

from __future__ import annotations

import os


def call_tree(fn, *args, include=None, hide=frozenset(), **kwargs) -> list[tuple[int, str]]:
    """Run fn(*args, **kwargs) under torch.profiler; return the recorded CPU calls as (depth, name).

    include(event) -> bool picks the calls to keep (default: all); depth counts only included
    ancestors, so dropped wrappers do not indent their children. A call whose name is in `hide`
    is left out together with everything it called.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    # Kineto, the profiler's tracing library, logs its start and stop to stderr unless its
    # log level is raised; it reads the level when the profiler first starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    include = include or (lambda event: True)
    # CPU activity only: operators are CPU-side events on every device, and tracing CUDA would
    # add the runtime's own calls (cudaDeviceSynchronize, ...) wherever a GPU is present.
    # acc_events: one cycle per profile anyway, and torch 2.11 warns on stderr without it.
    with profile(activities=[ProfilerActivity.CPU], acc_events=True) as prof:
        fn(*args, **kwargs)
    events = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU and include(e)),
        key=lambda e: e.time_range.start,
    )

    def depth(event):
        d, parent = 0, event.cpu_parent
        while parent is not None:
            d += bool(include(parent))
            parent = parent.cpu_parent
        return d

    def hidden(event):
        while event is not None:
            if event.name in hide:
                return True
            event = event.cpu_parent
        return False

    return [(depth(e), e.name) for e in events if not hidden(e)]


def print_call_tree(calls) -> None:
    """Print (depth, name) pairs as an indented tree."""
    for depth, name in calls:
        print("    " * depth + name)
