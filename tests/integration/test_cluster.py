"""Sweeps through submitit: the Slurm job each run becomes, and the same sweep run by submitit's
local executor (no Slurm needed), with one run killed and resubmitted."""

from __future__ import annotations

import doctest
import os
import signal
import sys
import threading
import time

import pandas as pd
import pytest

from ihprobe.cli import main
from ihprobe.io.runs import is_finished
from ihprobe.jobs import cluster, sweep
from ihprobe.jobs.cluster import Slurm

TRAIN = (
    "--producer",
    "iid",
    "--steps",
    "40",
    "--layers",
    "1",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--n-checkpoints",
    "8",
    "--device",
    "cpu",
)
POINT = {"n": 4, "batch": 4}
GRID = ["batch_size=2,4", "context=16"]


def test_without_submitit_the_slurm_launcher_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit raises ImportError
    argv = ["sweep", "--out", str(tmp_path / "s"), "--grid", "batch_size=2", "--launcher", "slurm"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'ihprobe[cluster]'" in err
    assert not (tmp_path / "s" / "runs").exists()  # refused before any work


def test_slurm_flags_need_the_slurm_launcher_and_slurm_needs_sbatch(tmp_path, monkeypatch, capsys):
    out = ["--out", str(tmp_path / "s"), "--grid", "batch_size=2"]
    assert main(["sweep", *out, "--partition", "gpu"]) == 2
    assert "--partition is for --launcher slurm" in capsys.readouterr().err
    monkeypatch.setattr(cluster.shutil, "which", lambda name: None)
    assert main(["sweep", *out, "--launcher", "slurm"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is not on PATH" in err


def test_a_multi_gpu_run_is_one_slurm_task_running_torchrun(tmp_path, monkeypatch):
    submitit = pytest.importorskip("submitit")
    slurm = Slurm(partition="gpu", time_min=120, gpus_per_run=4)
    run = sweep.plan(["batch_size=8"], tmp_path)[0]
    cmd = run.train_command(("--steps", "10"), slurm.launcher())
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert cmd[:7] == [*torchrun, "--nproc-per-node=4", "-m", "ihprobe"]
    assert cmd[7:10] == ["train", "--out", str(run.out)]
    assert Slurm(gpus_per_run=1).launcher() == [sys.executable, "-m", "ihprobe"]
    assert doctest.testmod(cluster).failed == 0
    slurm_executor = submitit.slurm.slurm.SlurmExecutor
    monkeypatch.setattr(slurm_executor, "affinity", classmethod(lambda cls: 2))  # "srun" found
    executor = submitit.AutoExecutor(folder=tmp_path / "slurm", cluster="slurm")
    executor.update_parameters(**slurm.parameters())  # submitit knows every name
    script = executor._executor._make_submission_file_text("CMD", "UID")
    for line in ("--partition=gpu", "--time=120", "--gpus-per-node=4", "--ntasks-per-node=1"):
        assert f"#SBATCH {line}\n" in script, line


def _kill_when_training(run_dir, done: threading.Event) -> None:
    """SIGKILL the ``ihprobe train`` of ``run_dir`` once it saved two checkpoints."""
    deadline = time.monotonic() + 240
    while len(list((run_dir / "checkpoints").glob("step-*"))) < 2:
        assert not done.is_set(), "the sweep ended before the run was killed"
        assert time.monotonic() < deadline, "the run saved no checkpoints within 4 minutes"
        time.sleep(0.005)
    os.kill(int((run_dir / ".lock").read_text().split()[0]), signal.SIGKILL)


@pytest.mark.slow
def test_local_executor_sweep_matches_local_and_resubmits_only_the_killed_run(
    tmp_path, monkeypatch
):
    pytest.importorskip("submitit")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the same float sums in every process
    written, failed = sweep.run_sweep(GRID, tmp_path / "local", train_args=TRAIN, **POINT)
    assert failed == {}
    expected = pd.read_csv(written["table"])
    assert expected[["batch_size", "context"]].values.tolist() == [[2, 16], [4, 16]]

    submitted = []
    real_submit = sweep.submit_all
    monkeypatch.setattr(
        sweep,
        "submit_all",
        lambda runs, *a: submitted.append([r.name for r in runs]) or real_submit(runs, *a),
    )
    slurm = Slurm(gpus_per_run=0, cluster="local")
    out = tmp_path / "slurm"
    killed = out / "runs" / "batch_size=4_context=16"
    done, result = threading.Event(), {}

    def first_sweep():
        result["failed"] = sweep.run_sweep(GRID, out, train_args=TRAIN, slurm=slurm, **POINT)[1]
        done.set()

    thread = threading.Thread(target=first_sweep)
    thread.start()
    _kill_when_training(killed, done)
    thread.join(timeout=300)
    assert list(result["failed"]) == [killed.name]  # the failed job is listed
    assert result["failed"][killed.name].endswith("ihprobe train failed")
    assert not is_finished(killed) and is_finished(out / "runs" / "batch_size=2_context=16")
    finished_log = (out / "runs" / "batch_size=2_context=16.log").stat().st_size

    written, failed = sweep.run_sweep(GRID, out, train_args=TRAIN, slurm=slurm, **POINT)
    assert failed == {}
    assert submitted == [[r.name for r in sweep.plan(GRID, out)], [killed.name]]
    assert (out / "runs" / "batch_size=2_context=16.log").stat().st_size == finished_log
    table = pd.read_csv(written["table"])
    assert table.pop("model").tolist() == [str(r.out) for r in sweep.plan(GRID, out)]
    expected.pop("model")  # the run directories, under the other sweep
    pd.testing.assert_frame_equal(table, expected)  # same fit-law inputs, same everything else
