"""Fresh processes for the tests of what mylinearops reads once per process (its environment
switches, the ISA calibration, the tuning search).

A new Python spends over a second importing torch, and such tests need one process each. So the
children are forked from a server that has imported torch and nothing else (multiprocessing's
forkserver, with torch preloaded): each child sets its environment, then imports mylinearops
for the first time, as a new Python would. No thread has started in the server (torch starts
its thread pools at the first parallel operation), so forking it is safe, as it is for a
DataLoader's workers. This module must not import mylinearops.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
import traceback

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["torch"])


def _run(code: str, env: dict[str, str], results) -> None:
    """In the child: `code` as a script, with `env` as the whole environment; stdout and stderr
    (file descriptors 1 and 2, so C++ output too) and the exit status go back through `results`."""
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        status = 0
        try:
            exec(compile(code, "<child>", "exec"), {"__name__": "__main__"})
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
        results.send((status, *texts))


def run_children(jobs: list[tuple[str, dict[str, str]]]) -> list[subprocess.CompletedProcess]:
    """Run each (code, environment) in its own fresh process, all at once; like subprocess.run
    with capture_output=True and text=True, one result per job, in order."""
    started = []
    for code, env in jobs:
        receive, send = _CONTEXT.Pipe(duplex=False)
        child = _CONTEXT.Process(target=_run, args=(code, env, send))
        child.start()
        send.close()
        started.append((child, receive))
    results = []
    for (code, _), (child, receive) in zip(jobs, started):
        try:
            status, stdout, stderr = receive.recv()
        except EOFError:  # died without reporting (a crash): its exit status says how
            status, stdout, stderr = None, "", ""
        child.join()
        if status is None:
            status = child.exitcode
        results.append(subprocess.CompletedProcess(["<forked child>", code], status, stdout, stderr))
    return results
