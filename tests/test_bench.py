"""Smoke test of the extension's benchmark (ext/bench/bench_matmul.py; not a timing test): its pieces run on
tiny shapes, check correctness before timing, and write a readable report."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "ext" / "bench" / "bench_matmul.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_matmul", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_pieces_produce_a_report(bench):
    rows = [
        bench.bench_shape("cpu", 9, 17, 5, kind, rounds=1, target_s=1e-4, quick=True)
        for kind in ("forward", "backward")
    ]
    for row in rows:
        assert "torch.mm" in row["variants"]
        for name, v in row["variants"].items():
            assert not v.get("failed_check"), name
            assert v["gflops"] > 0
            assert name == bench.ROOF or v["max_error_per_sqrt_k"] < 1e-4  # the FMA loop is no product
    assert "numpy" in rows[0]["variants"] and "vs_numpy" in rows[0]["variants"]["auto"]
    train = bench.mlp_train_step("cpu", rounds=2, steps_per_round=1)
    assert train["same_loss_curve"] and train["linearlayer_over_nn_linear"] > 0
    assert len(train["round_ratios"]) == 2 and min(train["round_ratios"]) > 0
    machine = bench.machine_description("cpu", peak_seconds=0.002)
    report = {
        "device": "cpu",
        "quick": True,
        "rounds": 1,
        "target_ms": 0.1,
        "machine": machine,
        "results": rows,
        "mlp_train_step": train,
    }
    bench.add_peak_shares(report)
    report["targets"] = bench.cpu_targets(report)
    text = bench.markdown(report)
    assert "| 9 x 17 x 5 |" in text and "blocked" in text
    assert "LinearLayer / nn.Linear time" in text
    assert "The same ratio per round (2 rounds)" in text
    assert "Measured FP32 FMA peak" in text and "generic" in machine["fma_peak_gflops"]
    assert set(machine["microkernel_gflops"]) == set(machine["fma_peak_gflops"])
    assert set(machine["microkernel_ceiling_gflops"]) == set(machine["fma_peak_gflops"])
    assert "micro-kernel alone, 1 thread, data in L1" in text and "timed in alternation" in text
    assert 0 < rows[0]["variants"]["auto"]["pct_of_peak"]
    assert 0 < rows[0]["variants"]["auto"]["pct_of_roof_same_rounds"] and "fma_loop" in rows[0]["variants"]
    # the results file is named after the machine: vendor, family, model, threads
    cpu = machine["cpu"]
    assert machine["id"] == f"cpu-{cpu['vendor']}-f{cpu['family']}-m{cpu['model']}-{machine['threads']}t"


def test_targets_are_judged_from_the_1024_row(bench):
    auto = {"gflops": 1.0, "vs_torch": 1.02, "vs_numpy": 0.85, "pct_of_roof_same_rounds": 0.7, "pct_of_peak": 0.8}
    report = {
        "results": [
            {"kind": "forward", "m": 512, "k": 512, "n": 512, "variants": {"auto": {**auto, "vs_torch": 0.5}}},
            {"kind": "forward", "m": 1024, "k": 1024, "n": 1024, "variants": {"auto": auto}},
        ],
        "mlp_train_step": {"linearlayer_over_nn_linear": 1.1},
    }
    verdicts = [t["met"] for t in bench.cpu_targets(report)]
    names = [t["name"] for t in bench.cpu_targets(report)]
    assert verdicts == [True, False, False, True, False], names
    assert "same rounds" in names[2] and "best of 3" in names[3]
    assert all("target" in bench.format_target(t) for t in bench.cpu_targets(report))


def test_the_peak_is_the_higher_of_before_and_after_the_run(bench):
    # a busy moment can only slow the FMA loop: a stolen second core read 2 threads as 1
    before = {"avx512": {"1": 190.0, "2": 189.0}, "avx2": {"1": 98.0, "2": 179.0}}
    after = {"avx512": {"1": 185.0, "2": 370.0}, "avx2": {"1": 97.0, "2": 186.0}}
    assert bench.higher_peaks(before, after) == {"avx512": {"1": 190.0, "2": 370.0}, "avx2": {"1": 98.0, "2": 186.0}}
    auto = {"gflops": 1.0, "vs_torch": 1.0, "vs_numpy": 1.0, "pct_of_roof_same_rounds": 0.8, "pct_of_peak": 0.8}
    report = {
        "machine": {"fma_peak_gflops_after": after},
        "results": [{"kind": "forward", "m": 1024, "k": 1024, "n": 1024, "variants": {"auto": auto}}],
    }
    assert "best of 3 before and 3 after the run" in bench.cpu_targets(report)[3]["name"]
    del report["machine"]  # a file recorded before the peak was measured after the run too
    assert "best of 3, before the run" in bench.cpu_targets(report)[3]["name"]


def test_intel_cpus_running_avx512_are_held_to_the_stricter_targets(bench):
    auto = {"gflops": 1.0, "vs_torch": 1.02, "vs_numpy": 1.1, "pct_of_roof_same_rounds": 0.84, "pct_of_peak": 0.86}

    def report(vendor, isa):
        machine = {
            "cpu": {"vendor": vendor},
            "mylinearops_cpu": {"preferred_isa": isa, "blocking": {isa: {"mr": 12, "nr": 32}}},
            "microkernel_gflops": {isa: 94.0},
            "microkernel_ceiling_gflops": {isa: 100.0},
        }
        return {
            "machine": machine,
            "results": [{"kind": "forward", "m": 1024, "k": 1024, "n": 1024, "variants": {"auto": auto}}],
            "mlp_train_step": {"linearlayer_over_nn_linear": 0.99},
        }

    intel = bench.cpu_targets(report("intel", "avx512"))
    assert [t["met"] for t in intel] == [True, True, False, True, True, False], [t["name"] for t in intel]
    assert [t["target"] for t in intel][2:4] == [0.85, 0.85]
    assert "avx512 micro-kernel (12x32) alone" in intel[-1]["name"] and intel[-1]["value"] == 0.94
    assert bench.format_target(intel[-1]).endswith(": 94% (target >= 95%): NOT met")
    # elsewhere (an AMD CPU, or an Intel one capped at AVX2): the book-wide targets, no micro-kernel line
    for other in (report("amd", "avx512"), report("intel", "avx2")):
        targets = bench.cpu_targets(other)
        assert [t["met"] for t in targets] == [True] * 5 and targets[2]["target"] == 0.75


def test_rejudge_rewrites_only_the_verdicts(bench, tmp_path):
    # A recorded run judged again against the current targets: the AMD files keep their
    # verdicts (their targets did not change), and the measurements are left as they were.
    def measured(report):
        return {k: v for k, v in report.items() if k not in ("targets", "targets_rejudged")}

    amd_files = sorted((BENCH.parent / "results").glob("cpu-amd-f25-*.json"))
    assert amd_files, "the committed Zen 3 and Zen 4 results files"
    for path in amd_files:
        copy = tmp_path / path.name
        copy.write_text(path.read_text())
        before = json.loads(copy.read_text())
        after = bench.rejudge(copy)
        assert after["targets"] == before["targets"]
        assert measured(after) == measured(before)
        assert json.loads(copy.read_text()) == after
        assert "`--rejudge`" in copy.with_suffix(".md").read_text()
    gpu = tmp_path / "cuda-x.json"
    gpu.write_text(json.dumps({"device": "cuda", "machine": {}}))
    with pytest.raises(SystemExit, match="reads a CPU results file"):
        bench.rejudge(gpu)


def test_bench_rejects_a_wrong_kernel(bench, monkeypatch):
    # A variant that returns a wrong result is reported, not timed.
    import mylinearops

    real = mylinearops.matmul
    monkeypatch.setattr(
        mylinearops, "matmul", lambda A, B, algo="auto": real(A, B, algo=algo) + (algo == "blocked")
    )
    row = bench.bench_shape("cpu", 8, 8, 8, "forward", rounds=1, target_s=1e-4, quick=True)
    assert row["variants"]["blocked"].get("failed_check") and "gflops" not in row["variants"]["blocked"]
    assert "gflops" in row["variants"]["torch.mm"]


def test_roof_is_the_highest_measured_peak_not_the_widest_isa(bench, monkeypatch):
    # Zen 4: AVX-512 on 256-bit units peaks no higher than AVX2. The roof, and the FMA loop timed
    # beside the kernels, is whichever measured highest.
    zen4_like = {"threads": 2, "fma_peak_gflops": {"avx512": {"1": 114.0, "2": 226.0}, "avx2": {"1": 116.0, "2": 231.0}}}
    assert bench.best_peak(zen4_like) == ("avx2", 231.0)
    import torch

    looped = []
    monkeypatch.setattr(torch.ops.mylinearops, "cpu_fma_loop", lambda isa, threads, iterations: looped.append(isa) or 96 * iterations, raising=False)
    fn, flops = bench.roof_call(96 * 1000, "generic")
    fn()
    assert looped and set(looped) == {"generic"} and flops == 96 * 1000


def test_target_shape_records_its_rounds_and_per_round_ratios(bench):
    # Each round's torch.mm / auto ratio is kept at the target shape, so a results file shows
    # how far one round's verdict swings; the markdown names the extra rounds and the spread.
    row = bench.bench_shape("cpu", 8, 8, 8, "forward", rounds=3, target_s=1e-4, quick=True)
    per_round = row["variants"]["auto"]["vs_torch_per_round"]
    assert row["rounds"] == 3 and len(per_round) == 3 and min(per_round) > 0
    assert "vs_torch_per_round" not in row["variants"]["torch.mm"]

    auto = {"gflops": 1.0, "vs_torch": 1.05, "vs_torch_per_round": [1.2, 0.9, 1.1, 1.0]}
    report = {"rounds": 2, "results": [{"kind": "forward", "m": 1024, "k": 1024, "n": 1024, "rounds": 6, "variants": {"auto": auto}}]}
    assert bench.target_rounds_words(report) == ", 6 for the forward 1024^3 product the targets are read from"
    spread = bench.round_spread_words(report)
    assert "(4 rounds): lowest 0.90x, median 1.05x, highest 1.20x; 1 of 4 rounds below 1.00x." in spread
    report["results"][0]["rounds"] = 2  # no extra rounds: nothing to say
    assert bench.target_rounds_words(report) == ""
