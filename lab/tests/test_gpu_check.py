"""The device job: lab/benchmarks/gpu_check.sh parses, the benchmarks it runs import, its harness
turns a failure or a timeout into one row, and its CPU mode (``--device cpu --tiny``) runs every
step and passes, so that the job cannot rot where no GPU is lent."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"


def module(name: str):
    """A benchmark script loaded as its own run loads it, its folder's modules importable."""
    if name != "sections" and "sections" not in sys.modules:
        module("sections")  # what the scripts import from beside them
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_script_parses():
    done = subprocess.run(
        ["bash", "-n", str(BENCHMARKS / "gpu_check.sh")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_benchmarks_the_job_runs_import():
    scale, train = module("bench_scale"), module("bench_train")
    assert set(scale.TASKS) <= set(scale.MEASURES) and callable(train.main)
    assert callable(module("bench_fastpath").main) and callable(module("bench_series").main)
    heads = {"70m": 64, "160m": 64, "410m": 64, "1.4b": 128}  # d_head of EleutherAI/pythia-*
    for size, d_head in heads.items():
        cfg = scale.PYTHIA[size]
        assert cfg["hidden_size"] // cfg["num_attention_heads"] == d_head, size


def test_write_section_replaces_only_its_own_section(tmp_path):
    write_section = module("sections").write_section
    results = tmp_path / "RESULTS.md"
    results.write_text("# title\n\n<!-- begin gpu -->\nnot yet measured\n<!-- end gpu -->\ntail\n")
    write_section(results, "gpu", "H200: 1.1x")
    write_section(results, "cpu", "2 cores: 1.2x")
    write_section(results, "gpu", "H200: 1.0x")
    text = results.read_text()
    assert "not yet measured" not in text and "H200: 1.1x" not in text
    assert text.startswith("# title\n") and "tail\n" in text
    assert text.count("H200: 1.0x") == 1 and text.count("2 cores: 1.2x") == 1


@pytest.mark.slow  # three child processes: a few seconds each
def test_a_failed_or_timed_out_step_is_one_row_and_the_natural_step_is_a_no_op(monkeypatch):
    job = module("device_job")
    opts = SimpleNamespace(device="cpu", tiny=True)
    monkeypatch.delenv(job.NATURAL_GPU, raising=False)
    noop = job.run_step("natural-study", opts, 60)
    assert "no-op" in noop["text"]
    unknown = job.run_step("no-such-step", opts, 60)  # the child raises: recorded, not fatal
    assert unknown["error"].startswith("ValueError")
    assert "failed: ValueError" in job.markdown("no-such-step", unknown)


@pytest.mark.slow
def test_a_step_past_its_limit_is_killed_with_everything_it_started(tmp_path):
    job = module("device_job")
    pid_file = tmp_path / "grandchild"
    parent = (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); open(sys.argv[1], 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    code, _, _ = job.run_group([sys.executable, "-c", parent, str(pid_file)], 8)
    assert code is None
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # killed at once; reaped by init a moment later
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {grandchild} outlived its step")


def test_compare_holds_numbers_to_the_tolerance():
    import pandas as pd

    job = module("device_checks")
    cpu = pd.DataFrame({"model": ["m", "m"], "value": [1.0, float("nan")]})
    assert job.compare(cpu.assign(value=[1.00001, float("nan")]), cpu, job.FP32)[1]
    worst, ok = job.compare(cpu.assign(value=[1.1, float("nan")]), cpu, job.FP32)
    assert not ok and abs(worst - 0.1) < 1e-9
    assert job.compare(cpu.iloc[:1], cpu, job.FP32) == (
        pytest.approx(float("nan"), nan_ok=True),
        False,
    )


# The whole CPU mode takes 5-8 minutes on two shared cores; the suite runs the steps whose code
# is the job's own (correctness, training, the harness, a speed table read from a benchmark):
# correct-natural runs the same code as correct-160m, and speed-seeds the per-device launcher
# of tests/test_sweep_devices.py.
IN_SUITE = ("correct-160m", "correct-train", "speed-train", "natural-study")


@pytest.mark.slow
def test_the_cpu_mode_of_the_device_job_runs_its_steps_and_passes(tmp_path):
    results = tmp_path / "RESULTS_device.md"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("IHPROBE_NATURAL_GPU", None)
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "device_job.py"),
            "--device",
            "cpu",
            "--tiny",
            "--results",
            str(results),
            "--steps",
            ",".join(IN_SUITE),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = results.read_text()
    for name in IN_SUITE:
        assert f"### {name} (" in text, name
    assert "failed:" not in text and "FAIL" not in text, text
    assert "| tiny random | load (logits) | float32 |" in text and "CPU cores" in text
    assert "| tiny random | scan_patterns | float32 |" in text  # the reference path, checked too
    assert "| ihprobe train |" in text and "| demo | demo (device auto) |" in text


def _hanging(job):
    """A child that has finished nothing more and never returns."""
    pipe = job.subprocess.PIPE
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    return job.subprocess.Popen(argv, start_new_session=True, stdout=pipe, stderr=pipe, text=True)


def test_a_step_stopped_at_its_limit_keeps_the_rows_it_finished(tmp_path, monkeypatch):
    job = module("device_job")
    monkeypatch.setattr(job, "GRACE", 0.5)
    out = tmp_path / "step.json"
    rows = job.SavedRows(out)
    rows.append({"function": "scan", "result": "pass"})  # measured one row, then hangs
    started = {"proc": _hanging(job), "out": out, "limit": 0.5, "begin": time.perf_counter()}
    result = job.finish_step(started)
    assert result["rows"] == [{"function": "scan", "result": "pass"}]
    assert result["error"].startswith("timed out after 0 s; the rows above")
    text = job.markdown("correct-x", result)
    assert "| scan | pass |" in text and text.rstrip().endswith("are those it finished")
    nothing = {**started, "proc": _hanging(job), "out": tmp_path / "none.json"}
    empty = job.finish_step(nothing)
    assert "rows" not in empty and empty["error"] == "timed out after 0 s"


def test_limits_replace_the_steps_seconds_and_refuse_what_is_not_a_step():
    import argparse

    job = module("device_job")
    parser = argparse.ArgumentParser()
    found = job.limits("seeds-1=60,natural-study=0", parser)
    assert found == {"seeds-1": 60.0, "natural-study": 0.0}
    assert job.limits("", parser) == {}
    for bad in ("seeds-1", "seeds-1=soon", "no-such-step=5", "seeds-1=-1"):
        with pytest.raises(SystemExit) as exit_:
            job.limits(bad, parser)
        assert exit_.value.code == 2, bad


@pytest.mark.slow  # the script's import checks: about 20 s
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_runs_the_job_from_the_repository_root():
    """Run from anywhere, the script finds the repository root (it moved under lab/ once and
    looked for the job one folder too deep)."""
    done = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_check.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: device_job.py"), done.stdout[:500]


@pytest.mark.slow  # the script's import checks: about 20 s
@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("xz") is None, reason="bash, xz")
def test_gpu_check_gathers_every_natural_studys_finished_runs_and_results(tmp_path):
    """With IHPROBE_DEVICE_OUT, what a machine given back must keep comes back: the finished runs
    of the grid, the size arm and the late study (records and last checkpoint, no training
    state), and the studies' results files; an unfinished run stays behind."""
    root = tmp_path / "repo"
    (root / "lab" / "benchmarks").mkdir(parents=True)
    shutil.copy(BENCHMARKS / "gpu_check.sh", root / "lab" / "benchmarks")
    (root / "lab" / "benchmarks" / "device_job.py").write_text("print('the job ran')\n")
    results = root / "lab" / "studies" / "natural_law"
    results.mkdir(parents=True)
    (results / "results_late.csv").write_text("cell,seed,status\nB4-C64,1,done\n")
    (results / "RESULTS_late.md").write_text("# Late\n")
    studies = root / "runs" / "studies"
    runs = {
        "law-natural/B4-C256-d256-lr1e-3/seed1": True,
        "law-natural-late/B4-C64/seed1": True,
        "law-natural-late/B4-C512/seed1": False,  # still training: no result.json
    }
    for name, finished in runs.items():
        run = studies / name
        for step in ("step-000000", "step-000100"):
            (run / "checkpoints" / step).mkdir(parents=True)
            (run / "checkpoints" / step / "model.safetensors").write_bytes(b"w")
        (run / "state").mkdir()
        (run / "state" / "optimizer.pt").write_bytes(b"s")
        (run / "metrics.jsonl").write_text("{}\n")
        if finished:
            (run / "result.json").write_text("{}\n")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "IHPROBE_DEVICE_OUT": str(out)}
    env["IHPROBE_NATURAL_GPU"] = ""
    done = subprocess.run(
        ["bash", str(root / "lab" / "benchmarks" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the job ran" in done.stdout
    assert sorted(p.name for p in (out / "natural_law").iterdir()) == [
        "RESULTS_late.md",
        "results_late.csv",
    ]
    parts = sorted(out.glob("natural-runs.tar.xz.part-*"))
    archive = b"".join(p.read_bytes() for p in parts)
    listing = subprocess.run(
        ["tar", "-tJf", "-"], input=archive, capture_output=True, check=True
    ).stdout.decode()
    kept = set(listing.split())
    for name, finished in runs.items():
        run = f"runs/studies/{name}"
        expected = {f"{run}/result.json", f"{run}/metrics.jsonl", f"{run}/checkpoints/step-000100/"}
        assert expected <= kept if finished else not any(k.startswith(run) for k in kept), name
    assert not any("state" in k or "step-000000" in k for k in kept)
