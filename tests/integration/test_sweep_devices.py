"""K seeds on one device: ``ihprobe sweep --per-device K`` trains K runs at once on each device
of the machine (the CPU here), each told its ``--device``."""

from __future__ import annotations

import pytest

from ihprobe.cli import main
from ihprobe.io.runs import is_finished
from ihprobe.jobs import sweep

TRAIN = (
    "--producer",
    "iid",
    "--steps",
    "6",
    "--layers",
    "1",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--context",
    "16",
    "--batch-size",
    "4",
    "--n-checkpoints",
    "1",
)


@pytest.mark.slow
def test_per_device_trains_k_runs_at_once_on_the_device(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(sweep.torch.cuda, "is_available", lambda: False)
    started, real = [], sweep.subprocess.Popen

    def popen(cmd, **kwargs):
        alive = sum(proc.poll() is None for _, proc, _ in started)
        proc = real(cmd, **kwargs)
        started.append((cmd, proc, (alive, kwargs["env"]["OMP_NUM_THREADS"])))
        return proc

    monkeypatch.setattr(sweep.subprocess, "Popen", popen)
    runs = sweep.plan(["seed=0,1,2"], tmp_path)
    status = sweep.train_all(runs, TRAIN, per_device=2)
    assert status == {run.name: 0 for run in runs} and all(is_finished(r.out) for r in runs)
    assert all(cmd[cmd.index("--device") + 1] == "cpu" for cmd, _, _ in started)
    alive = [seen[0] for _, _, seen in started]
    assert alive[1] == 1 and max(alive) <= 1  # the second started beside the first, never 3
    cores = max(1, (sweep.os.cpu_count() or 1) // 2)
    assert {seen[1] for _, _, seen in started} == {str(cores)}


def test_per_device_refuses_jobs_slurm_and_a_device_flag(tmp_path, capsys):
    out = ["--out", str(tmp_path / "s"), "--grid", "seed=0", "--per-device", "2"]
    assert main(["sweep", *out, "--jobs", "2"]) == 2
    assert "--per-device sets how many runs train at once" in capsys.readouterr().err
    with pytest.raises(sweep.IhprobeError, match="drop --device"):
        sweep.train_all(sweep.plan(["seed=0"], tmp_path), ("--device", "cpu"), per_device=2)
    with pytest.raises(sweep.IhprobeError, match="at least 1 process per device"):
        sweep.device_slots(0)
