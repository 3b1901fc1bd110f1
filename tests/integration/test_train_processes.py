"""The trainer across processes: a run killed with SIGKILL resumes to the same weights, and DDP
over 2 CPU processes (torchrun, gloo) matches one process with the same global batch."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from ihprobe import checkpoints
from ihprobe.io.sources import resolve
from ihprobe.io.weights import read_state_dict
from ihprobe.training.trainer import TrainConfig, load_config, train

pytestmark = pytest.mark.slow

SMALL = ["--layers", "1", "--heads", "2", "--d-model", "16", "-C", "16"]


def cli(out, *extra) -> list[str]:
    data = ["--producer", "iid", "--option", "vocab_size=64", "--device", "cpu", "--no-progress"]
    return ["train", "--out", str(out), *data, *SMALL, *extra]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@contextlib.contextmanager
def one_thread():
    """The subprocesses run on one thread: match it so that float sums agree bit for bit."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def final_weights(run) -> dict[str, torch.Tensor]:
    return read_state_dict(resolve(checkpoints(run)[-1].source))


def test_a_run_killed_with_sigkill_resumes_to_the_weights_of_an_uninterrupted_run(tmp_path):
    killed = tmp_path / "killed"
    flags = ["-B", "4", "--steps", "400", "--checkpoints", "linear", "--n-checkpoints", "20"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ihprobe", *cli(killed, *flags)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (killed / "checkpoints" / "step-000040").is_dir():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no checkpoint appeared within 2 minutes"
            time.sleep(0.005)
        time.sleep(0.03)  # mid-way between checkpoints
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = [c.step for c in checkpoints(killed)]
    assert done[-1] < 400, f"the run finished before it was killed ({done}); make it longer"

    config = load_config(killed, resume=True)
    with one_thread():
        train(config)
        reference = train(load_config(killed, out=str(tmp_path / "reference"), resume=False))
    assert [c.step for c in checkpoints(killed)] == [c.step for c in checkpoints(reference)]
    resumed, uninterrupted = final_weights(killed), final_weights(reference)
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        assert torch.equal(resumed[name], uninterrupted[name]), name
    steps = [
        int(line.split('"step": ')[1].split(",")[0]) for line in open(killed / "metrics.jsonl")
    ]
    assert steps == list(range(10, 401, 10))  # the log reads as one run: no gaps, no repeats


def test_ddp_over_two_cpu_processes_matches_one_process_with_the_same_global_batch(tmp_path):
    flags = ["-B", "8", "--steps", "12", "--checkpoints", "linear", "--n-checkpoints", "2"]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    result = subprocess.run(
        [*launcher, "--nproc_per_node", "2", "-m", "ihprobe", *cli(tmp_path / "ddp", *flags)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = tmp_path / "ddp"
    config: TrainConfig = load_config(ddp, out=str(tmp_path / "single"))
    with one_thread():
        single = train(config)
    assert [c.step for c in checkpoints(ddp)] == [0, 6, 12]
    a, b = final_weights(ddp), final_weights(single)
    assert any(
        not torch.equal(a[k], read_state_dict(resolve(checkpoints(ddp)[0].source))[k]) for k in a
    )
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5), name
