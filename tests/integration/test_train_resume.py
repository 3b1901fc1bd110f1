"""Resuming a run: damaged training states refused in one line before anything is loaded or
rewritten, a moved or respelled run directory, writes that fail on a full disk or a size limit,
and extending a finished run's budget."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ihprobe import checkpoints
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import TMP_PREFIX, atomic_directory, atomic_write
from ihprobe.io.runs import METRICS, RUN_META, RunDir
from ihprobe.io.sources import resolve
from ihprobe.io.weights import read_state_dict
from ihprobe.training.trainer import TrainConfig, load_config, train
from tests.helpers import TINY_TRAIN

# the command line's spelling of TINY_TRAIN's model and data (steps and checkpoints apart)
TINY_FLAGS = ["--producer", "iid", "--vocab-size", "64", "--layers", "1", "--heads", "2"]
TINY_FLAGS += ["--d-model", "16", "-C", "16", "-B", "4", "--no-progress", "--device", "cpu"]


def tiny(tmp_path, name="run", **overrides) -> TrainConfig:
    """:data:`tests.helpers.TINY_TRAIN` for 10 updates: trains in well under a second."""
    return TrainConfig(**{**TINY_TRAIN, "out": str(tmp_path / name), "steps": 10, **overrides})


def final_weights(run) -> dict[str, torch.Tensor]:
    return read_state_dict(resolve(checkpoints(run)[-1].source))


def crash_in_update(n: int, monkeypatch) -> None:
    import ihprobe.training.trainer as trainer

    real, calls = trainer.causal_lm_loss, []

    def crash(model, tokens):
        calls.append(1)
        if len(calls) == n:
            raise RuntimeError("power cut")
        return real(model, tokens)

    monkeypatch.setattr(trainer, "causal_lm_loss", crash)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> tuple[Path, dict]:
    """A run killed in update 8 with its state at 6, and the weights an uninterrupted run
    ends with."""
    root = tmp_path_factory.mktemp("resume")
    reference = final_weights(train(tiny(root, "reference")))
    with pytest.MonkeyPatch.context() as mp:
        crash_in_update(8, mp)
        with pytest.raises(RuntimeError, match="power cut"):
            train(tiny(root, state_every=3))
    assert [p.name for p in (root / "run" / "state").iterdir()] == ["step-000006.pt"]
    return root / "run", reference


def copy_of(run: Path, tmp_path: Path, name: str = "copy") -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


# ----------------------------------------------------------------------------- damaged states


class RunsCode:
    """A pickle that would run code when loaded: it would create ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def damage(state_file: Path, how: str, tmp_path: Path) -> None:
    data = state_file.read_bytes()
    state = torch.load(state_file, weights_only=True)
    if how == "empty":
        state_file.write_bytes(b"")
    elif how == "truncated":
        state_file.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        state_file.write_bytes(os.urandom(len(data)))
    elif how == "pickle":
        torch.save({**state, "step": RunsCode(tmp_path / "ran")}, state_file)
    elif how == "list":
        torch.save([1, 2, 3], state_file)
    elif how == "no optimizer":
        del state["optimizer"]
        torch.save(state, state_file)
    elif how == "negative step":
        torch.save({**state, "step": torch.tensor(-5)}, state_file)
    elif how == "other step":
        torch.save({**state, "step": torch.tensor(4)}, state_file)
    elif how == "float step":
        torch.save({**state, "step": torch.tensor(6.0)}, state_file)
    elif how == "architecture":
        name = next(iter(state["model"]))
        state["model"][name] = torch.zeros(3, 5)
        torch.save(state, state_file)
    elif how == "optimizer shapes":
        moments = state["optimizer"]["state"][0]
        moments["exp_avg"] = torch.zeros(7)
        torch.save(state, state_file)
    elif how == "nan weights":
        name = next(iter(state["model"]))
        state["model"][name] = torch.full_like(state["model"][name], float("nan"))
        torch.save(state, state_file)
    elif how == "rng":
        torch.save({**state, "rng_cpu": torch.zeros(3)}, state_file)
    elif how == "nan seconds":
        torch.save({**state, "train_seconds": torch.tensor(float("nan"))}, state_file)


DAMAGE = {
    "empty": "is empty",
    "truncated": "not a complete torch file",
    "garbage": "not a complete torch file",
    "pickle": "Python objects other than tensors",
    "list": "holds a list, not a training state",
    "no optimizer": "no optimizer",
    "negative step": "step tensor\\(-5\\) is not an update of this run",
    "other step": "says update 4 but is named step-000006.pt",
    "float step": "is not an update of this run",
    "architecture": "weights do not fit the model this config builds",
    "optimizer shapes": "optimiser's exp_avg of parameter 0 has another shape",
    "nan weights": "NaN or inf",
    "rng": "rng_cpu is not a generator state",
    "nan seconds": "train_seconds tensor\\(nan\\) is not a count of seconds",
}


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_state_is_refused_in_one_line_before_anything_changes(crashed, tmp_path, how):
    run = copy_of(crashed[0], tmp_path)
    damage(run / "state" / "step-000006.pt", how, tmp_path)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(IhprobeError, match=DAMAGE[how]) as err:
        train(load_config(run, resume=True))
    message = str(err.value)
    assert "\n" not in message and "start over with a new --out" in message
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "ran").exists()  # the pickled command never ran


@pytest.mark.slow
def test_a_moved_and_respelled_run_resumes_to_the_weights_of_an_uninterrupted_run(
    crashed, tmp_path
):
    run, reference = crashed
    moved = copy_of(run, tmp_path, "moved")
    (tmp_path / "elsewhere").mkdir()
    respelled = tmp_path / "elsewhere" / ".." / "moved" / "."
    train(load_config(respelled, resume=True))
    assert [c.step for c in checkpoints(moved)] == [0, 5, 10]
    resumed = final_weights(moved)
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)
    assert not (run / "checkpoints" / "step-000010").exists()  # the original stayed as it was


# ----------------------------------------------------------------------------- full disks


def limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))


@pytest.mark.slow
def test_a_file_size_limit_while_training_is_one_line_and_leaves_no_torn_file(tmp_path):
    out = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "ihprobe",
        "train",
        "--out",
        str(out),
        *TINY_FLAGS,
        "--steps",
        "4",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=limit_file_size)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and "File too large" in err and "Traceback" not in err
    assert not list(out.rglob(f"{TMP_PREFIX}*"))
    for state in out.rglob("*.pt"):  # whatever was written is whole
        torch.load(state, weights_only=True)


def test_writers_that_wrap_the_os_error_still_say_disk_full(tmp_path):
    def torch_like(path):  # torch.save through a Python file: OSError in the context
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos") from None

    with pytest.raises(IhprobeError, match="disk full while writing"):
        atomic_write(tmp_path / "state.pt", lambda tmp: (tmp.write_bytes(b"half"), torch_like(tmp)))
    with pytest.raises(IhprobeError, match="disk full while writing .*step-000004"):
        with atomic_directory(tmp_path / "step-000004") as tmp:
            (tmp / "model.safetensors").write_bytes(b"half")
            raise Exception("Error while serializing: I/O error: No space left (os error 28)")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="not a write error"):  # other errors pass unchanged
        atomic_write(
            tmp_path / "x", lambda tmp: (_ for _ in ()).throw(ValueError("not a write error"))
        )


# ----------------------------------------------------------------------------- extensions


@pytest.mark.slow
def test_a_finished_constant_rate_run_extends_to_the_weights_of_a_longer_run(tmp_path):
    # warm-up 0.25 of 8 updates is 2; the longer run keeps those 2 (0.125 of 16)
    short = train(tiny(tmp_path, steps=8, schedule="constant", warmup=0.25, lr=1e-2))
    longer = train(
        tiny(tmp_path, "reference", steps=16, schedule="constant", warmup=0.125, lr=1e-2)
    )
    train(load_config(short, resume=True, steps=16))
    assert [c.step for c in checkpoints(short)] == [0, 4, 8, 12, 16]  # spacing 4 goes on
    extended, reference = final_weights(short), final_weights(longer)
    assert all(torch.equal(extended[k], reference[k]) for k in reference)
    meta = json.loads((short / RUN_META).read_text())
    assert meta["steps"] == 16 and meta["checkpoint_steps"] == [0, 4, 8, 12, 16]
    assert meta["extensions"] == [
        {"from_steps": 8, "to_steps": 16, "from_tokens": 8 * 64, "to_tokens": 16 * 64}
    ]
    assert load_config(short).steps == 16
    lrs = [r["lr"] for r in RunDir(short).records(METRICS)]
    assert lrs == [r["lr"] for r in RunDir(longer).records(METRICS)] and lrs[-1] == 1e-2


@pytest.mark.slow
def test_the_cli_extends_by_tokens_and_refuses_cosine_and_shorter_budgets(tmp_path, capsys):
    from ihprobe.cli import main

    small = [*TINY_FLAGS, "--checkpoints", "linear", "--n-checkpoints", "2"]
    constant, cosine = tmp_path / "constant", tmp_path / "cosine"
    assert (
        main(["train", "--out", str(constant), "--tokens", "512", "--schedule", "constant", *small])
        == 0
    )
    assert main(["train", "--out", str(constant), "--resume", "--tokens", "1024"]) == 0
    assert [c.tokens for c in checkpoints(constant)] == [0, 256, 512, 768, 1024]
    assert load_config(constant).tokens == 1024

    assert main(["train", "--out", str(cosine), "--tokens", "512", *small]) == 0
    before = (cosine / RUN_META).read_text()
    capsys.readouterr()
    assert main(["train", "--out", str(cosine), "--resume", "--tokens", "1024"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot extend" in err and "cosine learning rate decays to 0 at update 8" in err
    assert (cosine / RUN_META).read_text() == before
    assert main(["train", "--out", str(constant), "--resume", "--tokens", "256"]) == 2
    assert "cannot shorten" in capsys.readouterr().err
