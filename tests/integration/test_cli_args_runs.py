"""A run directory under the command line: a running ``train`` holds its lock, a full disk is one
line and leaves no partial files, checkpoints carry their sha256, duplicate weights are flagged,
a resumed run logs each step once, and a corrupt scan cache entry is dropped and rescanned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import TMP_PREFIX
from ihprobe.io.runs import LOCK, METRICS, RunDir, checkpoint_meta, checkpoints


def tiny_train(out: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--out",
        str(out),
        "--producer",
        "iid",
        "--vocab-size",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--d-model",
        "16",
        "-C",
        "16",
        "-B",
        "4",
        "--steps",
        "6",
        "--checkpoints",
        "linear",
        "--n-checkpoints",
        "2",
        "--log-every",
        "2",
        "--device",
        "cpu",
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("cli") / "run"
    assert main(tiny_train(run)) == 0
    return run


@pytest.mark.slow  # a fresh Python process holds the lock: seconds
def test_a_running_train_holds_its_run_directory(tmp_path, capsys):
    run = tmp_path / "run"
    hold = "import sys, time; from ihprobe.io.runs import RunDir; "
    hold += "held = RunDir(sys.argv[1]).lock(); held.__enter__(); print('held', flush=True); "
    hold += "time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(run)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        assert main(tiny_train(run, "--resume")) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"process {holder.pid}" in err
        assert not list(run.rglob(f"{TMP_PREFIX}*")) and not (run / METRICS).exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its lock is stale, and the next train takes it over
    assert main(tiny_train(run)) == 0
    assert not (run / LOCK).exists()


def test_the_lock_holds_this_process_id_while_training(tmp_path, monkeypatch):
    import ihprobe.training.trainer as trainer

    loss, seen = trainer.causal_lm_loss, []

    def look_at_the_lock(model, tokens):
        seen.append((tmp_path / "run" / LOCK).read_text().split()[0])
        return loss(model, tokens)

    monkeypatch.setattr(trainer, "causal_lm_loss", look_at_the_lock)
    assert main(tiny_train(tmp_path / "run")) == 0
    assert set(seen) == {str(os.getpid())} and len(seen) == 6
    assert not (tmp_path / "run" / LOCK).exists()


def test_disk_full_while_training_is_one_line_and_cleans_up(tmp_path, monkeypatch, capsys):
    import ihprobe.training.trainer as trainer

    def full(obj, file, *args, **kwargs):
        file.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trainer.torch, "save", full)
    assert main(tiny_train(tmp_path / "run")) == 2
    assert "disk full" in capsys.readouterr().err
    assert not list((tmp_path / "run").rglob(f"{TMP_PREFIX}*"))
    assert not (tmp_path / "run" / LOCK).exists()


def test_checkpoints_record_sha256_and_load_refuses_a_changed_file(tiny_run, tmp_path, capsys):
    import hashlib
    import shutil

    import ihprobe

    source = Path(checkpoints(tiny_run)[-1].source)
    recorded = checkpoint_meta(source)["sha256"]
    for name, digest in recorded.items():
        assert hashlib.sha256((source / name).read_bytes()).hexdigest() == digest
    copy = tmp_path / "ckpt"
    shutil.copytree(source, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100:] = bytes(100)  # same size, last 100 bytes zeroed
    weights.write_bytes(bytes(data))
    with pytest.raises(IhprobeError, match="model.safetensors does not match the SHA-256"):
        ihprobe.load(copy)
    assert main(["info", str(copy)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_duplicate_weights_are_flagged_by_info_and_scan(tiny_run, tmp_path, capsys):
    import shutil

    import pandas as pd

    run = tmp_path / "dup"
    shutil.copytree(tiny_run / "checkpoints", run / "checkpoints")
    last = checkpoints(run)[-1].source
    shutil.copytree(last, run / "checkpoints" / "step-000099")
    assert main(["info", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count("same weights as") == 1 and "step-000099" in out
    scan_out = tmp_path / "scan"
    argv = [
        "scan",
        str(run),
        "--metrics",
        "prefix_matching",
        "--batch",
        "4",
        "--out",
        str(scan_out),
    ]
    assert main(argv) == 0
    table = pd.read_csv(scan_out / "scores.csv")
    flagged = table.dropna(subset=["duplicate_of"])
    assert set(flagged["duplicate_of"]) == {last}
    assert len(flagged) * len(checkpoints(run)) == len(table)  # one checkpoint's rows


def test_a_resumed_run_logs_each_step_once_with_the_same_losses(tmp_path, monkeypatch):
    import ihprobe.training.trainer as trainer
    from ihprobe.training.trainer import load_config, train

    assert main(tiny_train(tmp_path / "reference")) == 0
    reference = RunDir(tmp_path / "reference").records(METRICS)
    loss, calls = trainer.causal_lm_loss, []

    def power_cut_in_update_4(model, tokens):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("power cut")
        return loss(model, tokens)

    monkeypatch.setattr(trainer, "causal_lm_loss", power_cut_in_update_4)
    with pytest.raises(RuntimeError, match="power cut"):
        main(tiny_train(tmp_path / "run", "--state-every", "3"))
    monkeypatch.undo()
    train(load_config(tmp_path / "run", resume=True))
    resumed = RunDir(tmp_path / "run").records(METRICS)
    assert [r["step"] for r in resumed] == [2, 4, 6]
    # the state at update 3 carries the open window: the line at 4 averages updates 3 and 4
    assert [r["loss"] for r in resumed] == [r["loss"] for r in reference]
    assert not any("partial_window" in r for r in resumed)


def test_corrupt_cache_entries_are_dropped_and_rescanned(tiny_run, tmp_path, caplog):
    import ihprobe

    cache = tmp_path / "cache"
    scan = {"batch": 4, "n": 4}
    first = ihprobe.trajectory(tiny_run, ["prefix_matching"], cache=cache, **scan)
    entries = sorted((cache / "scans").iterdir())
    entries[0].write_bytes(os.urandom(64))
    entries[1].write_text(json.dumps({"rows": [[0, 1]]}))  # wrong shape
    again = ihprobe.trajectory(tiny_run, ["prefix_matching"], cache=cache, **scan)
    assert again["value"].tolist() == first["value"].tolist()
    dropped = [r for r in caplog.records if "bad cache entry" in r.getMessage()]
    assert len(dropped) == 2
    assert all(json.loads(p.read_text())["value"] for p in (cache / "scans").iterdir())
