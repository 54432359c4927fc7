"""What only a GPU can show, measured for the chapters that show it.

    python tools/gpu_facts.py OUT.json

Runs the chapters' own exported code (booktools.generated) on the current GPU and writes one
JSON file: the GPU, driver, CUDA and cuDNN versions and the date, then
  - setup: the device memory a new process's CUDA context takes, and its first matrix product
    outside PyTorch's caching allocator (cuda_context_cost), with lazy and with eager module
    loading; what CUDA_VISIBLE_DEVICES='' changes once the driver has started
    (late_cuda_visible_devices);
  - alexnet: the ATen calls of a convolution on the GPU, and the GPU kernels each of AlexNet's
    five convolutions launches (gpu_kernels), with cuDNN's TF32 default, with TF32 off, and
    with cudnn.benchmark on.
  - setup: how long the first `import mylinearops` takes where it is not installed (as on
    Colab): a JIT build of the CPU and CUDA kernels on two CPUs (first_import_two_cpus).
A fact that fails is recorded with its error instead of stopping the others.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import torch

import mylinearops

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from booktools.generated.alexnet import AlexNet, aten_call_tree, gpu_kernels  # noqa: E402
from booktools.generated.setup import cuda_context_cost, late_cuda_visible_devices  # noqa: E402


def context_costs() -> dict:
    out = {}
    for loading in ("LAZY", "EAGER"):  # the child process inherits this environment
        os.environ["CUDA_MODULE_LOADING"] = loading
        context, first_matmul = cuda_context_cost(0)
        out[loading.lower()] = {"context_bytes": context, "first_matmul_bytes_outside_allocator": first_matmul}
    os.environ.pop("CUDA_MODULE_LOADING")
    return out


def alexnet_convolutions() -> dict:
    torch.manual_seed(0)
    model = AlexNet().cuda().eval()
    image = torch.randn(1, 3, 224, 224, device="cuda")
    conv1 = model.features[0]
    out = {"conv1_aten_calls": [name for _, name in aten_call_tree(conv1, image)]}
    inputs = []  # each convolution's input, from the layers before it
    with torch.no_grad():
        x = image
        for layer in model.features:
            if isinstance(layer, torch.nn.Conv2d):
                inputs.append((layer, x))
            x = layer(x)
    settings = {
        "default (cudnn.allow_tf32=True)": dict(allow_tf32=True, benchmark=False),
        "cudnn.allow_tf32=False": dict(allow_tf32=False, benchmark=False),
        "cudnn.benchmark=True": dict(allow_tf32=True, benchmark=True),
    }
    cudnn = torch.backends.cudnn
    saved = (cudnn.allow_tf32, cudnn.benchmark)
    try:
        for label, s in settings.items():
            cudnn.allow_tf32, cudnn.benchmark = s["allow_tf32"], s["benchmark"]
            with torch.no_grad():
                out[label] = [
                    {"layer": repr(layer), "input": list(x.shape), "kernels": gpu_kernels(layer, x)}
                    for layer, x in inputs
                ]
    finally:
        cudnn.allow_tf32, cudnn.benchmark = saved
    return out


def first_import_two_cpus() -> dict:
    """The first `import mylinearops` where it is not installed, as on Colab: a JIT build of the
    CPU and CUDA kernels into an empty directory, in a process held to two CPUs (ninja starts as
    many compile jobs as the process may use)."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    code = (
        "import time; t = time.perf_counter()\n"
        "import mylinearops, mylinearops.jit as jit\n"
        "print(time.perf_counter() - t, jit._loaded['seconds'], len(mylinearops.available_algos('cuda')))"
    )
    with tempfile.TemporaryDirectory() as build_dir:
        env = {**os.environ, "MYLINEAROPS_JIT": "1", "MYLINEAROPS_BUILD_DIR": build_dir, "PYTHONPATH": str(REPO / "ext")}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    import_s, build_s, cuda_algos = done.stdout.split()[-3:]
    return {"cpus": len(cpus), "import_seconds": round(float(import_s), 1), "build_seconds": round(float(build_s), 1),
            "cuda_kernels": int(cuda_algos) > 0}


def main(path: str) -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU visible", file=sys.stderr)
        return 1
    props = torch.cuda.get_device_properties(0)
    facts = {
        "gpu": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_bytes": props.total_memory,
        "driver": mylinearops.gpu_driver_version(),
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    measures = (
        ("cuda_context", context_costs),
        ("late_cuda_visible_devices", late_cuda_visible_devices),
        ("alexnet", alexnet_convolutions),
        ("first_import_two_cpus", first_import_two_cpus),
    )
    for name, measure in measures:
        try:
            facts[name] = measure()
        except Exception as e:  # record it, and go on with the next fact
            facts[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(name, json.dumps(facts[name])[:2000], flush=True)
    Path(path).write_text(json.dumps(facts, indent=2) + "\n")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpu-facts.json"))
