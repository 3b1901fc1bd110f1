"""Cache entries, sizes, long work and resuming with nothing to resume (issue 45); each case
states its outcome: one ``IhprobeError`` line (exit status 2 through the CLI), a documented
warning, or a result checked against a reference.

* The cache: an entry nested too deep, of another format, of the layout before formats, with a
  wrong checksum or not an object is dropped with a warning and recomputed; an entry without a
  format is format 1 and reads.
* Sizes: training flags far past memory are refused with the estimate and how to shrink it; the
  estimate grows with every flag; long work is announced as a warning.
* ``--resume`` with nothing to resume is one line; ``--resume-or-start`` starts a run.
* docs/reliability.md states the suite's case count.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from unittest import mock

import pytest

from ihprobe.cli import main
from ihprobe.core import cache, calls, memory
from ihprobe.core.errors import IhprobeError
from ihprobe.training.config import TrainConfig, check_training_size
from tests.helpers import one_line

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- cache entries

ENTRIES = {
    "nested too deep": b"[" * 100_000 + b"]" * 100_000,
    "another format": json.dumps({"format": 99, "sha256": "0", "value": [1]}).encode(),
    "wrong checksum": json.dumps({"format": 1, "sha256": "0" * 64, "value": [1]}).encode(),
    "not an object": b"[1, 2]",
    "old layout": json.dumps({"rows": [[0, 1, "m", 0.5]]}).encode(),
}


@pytest.mark.parametrize("case", ENTRIES)
def test_bad_cache_entries_are_dropped_with_a_warning(tmp_path, caplog, case):
    file = tmp_path / "scans" / "entry.json"
    file.parent.mkdir()
    file.write_bytes(ENTRIES[case])
    with caplog.at_level(logging.WARNING):
        assert cache.read(file, check=lambda value: value) is None
    assert not file.exists() and "dropping the bad cache entry" in caplog.text


def test_an_entry_without_a_format_is_format_1_and_reads(tmp_path):
    file = tmp_path / "entry.json"
    value = [[0, 1, "prefix_matching", 0.5]]
    digest = cache._digest(value)
    file.write_text(json.dumps({"sha256": digest, "value": value}))
    assert cache.read(file, check=lambda v: v) == value
    cache.write(file, value)
    assert json.loads(file.read_text())["format"] == cache.FORMAT


# ----------------------------------------------------------------------------- sizes and resume

GB = 2**30
HUGE = {
    "--d-model 1e6 --heads 1": {"d_model": 10**6, "heads": 1},
    "--d-mlp 1e9": {"d_mlp": 10**9},
    "--layers 1e5": {"layers": 100_000},
    "-C 1e8": {"context": 10**8},
    "-B 1e9": {"batch_size": 10**9},
    "--heads 512 --d-model 512 -C 65536": {"heads": 512, "d_model": 512, "context": 65536},
    "vocab_size 1e9": {"producer_options": {"vocab_size": 10**9}},
}


@pytest.mark.parametrize("case", HUGE)
def test_training_past_memory_is_refused_before_any_tensor(case):
    with mock.patch.object(memory, "available_bytes", lambda device="cpu": 3 * GB):
        message = one_line(lambda: check_training_size(TrainConfig(**HUGE[case])))
    assert "GB but" in message and "--d-model" in message and memory.SIZE_LIMIT_ENV in message


def test_the_default_training_fits_and_the_override_lifts_the_check(monkeypatch):
    with mock.patch.object(memory, "available_bytes", lambda device="cpu": 3 * GB):
        check_training_size(TrainConfig())
        monkeypatch.setenv(memory.SIZE_LIMIT_ENV, "1")
        check_training_size(TrainConfig(layers=100_000))


def test_the_estimate_grows_with_every_flag():
    base = memory.Shape(2, 4, 64, 256, 512, 64)
    one = memory.estimate(base, train_batch=32, steps=10)
    for field, value in [
        ("layers", 4),
        ("d_model", 128),
        ("d_mlp", 512),
        ("vocab", 1024),
        ("context", 128),
    ]:
        bigger = memory.Shape(**{**base.__dict__, field: value})
        grown = memory.estimate(bigger, train_batch=32, steps=10)
        assert grown.bytes > one.bytes and grown.flops > one.flops, field
    assert memory.estimate(base, train_batch=64, steps=10).bytes > one.bytes
    assert memory.estimate(base, rows=100, groups=10).flops > memory.estimate(base, rows=100).flops


def test_long_work_is_announced_before_it_starts(caplog):
    """``ablate --random 100000``: the estimate warns; nothing runs here (a stand-in model)."""
    from types import SimpleNamespace

    import torch

    cfg = SimpleNamespace(
        n_layers=2, n_heads=8, d_model=128, d_mlp=512, d_vocab=512, n_ctx=256, device="cpu"
    )
    model = torch.nn.Linear(1, 1)
    model.cfg = cfg
    with caplog.at_level(logging.WARNING):
        calls.arguments(model=model, random=100_000, batch=100)
    assert "of work by a rough estimate" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        calls.arguments(model=model, random=2, batch=4)
    assert "of work" not in caplog.text


def test_a_long_context_model_is_estimated_at_the_rows_a_call_runs(monkeypatch):
    """Pythia-160m's shape (n_ctx 2,048) scanned with batch=8 on a 16 GiB machine: allowed, as
    the probes' rows are at most 512 tokens (estimating whole contexts once asked for 55 GB);
    tokens a caller passes count at their own length."""
    from types import SimpleNamespace

    import torch

    cfg = SimpleNamespace(
        n_layers=12, n_heads=12, d_model=768, d_mlp=3072, d_vocab=50304, n_ctx=2048, device="cpu"
    )
    model = torch.nn.Linear(1, 1)
    model.cfg = cfg
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 16 * 2**30)
    calls.arguments(model=model, batch=8)  # fits
    assert memory.shape_of(cfg).context == memory.LONGEST_ROW
    long_rows = torch.zeros(64, 2048, dtype=torch.long)
    with pytest.raises(IhprobeError, match="needs about"):  # 64 whole contexts do not fit
        calls.arguments(model=model, tokens=long_rows, batch=64)
    calls.arguments(model=model, tokens=long_rows[:8, :100], batch=8)  # short ones do


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_resume_with_nothing_to_resume_is_one_line(tmp_path, capsys, folder):
    out = tmp_path / folder
    if folder == "empty":
        out.mkdir()
    assert main(["train", "--out", str(out), "--resume", "--producer", "iid"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing to resume" in err, err
    assert not (out / "run.json").exists()


def test_resume_or_start_starts_a_new_run(tmp_path, capsys):
    out = tmp_path / "new"
    flags = [
        "--producer",
        "iid",
        "--layers",
        "1",
        "--d-model",
        "16",
        "-C",
        "8",
        "-B",
        "2",
        "--steps",
        "2",
        "--n-checkpoints",
        "1",
        "-q",
    ]
    assert main(["train", "--out", str(out), "--resume-or-start", *flags]) == 0
    assert (out / "run.json").is_file()
    assert main(["train", "--out", str(out), "--resume", *flags]) == 0  # now there is a run


@pytest.mark.slow  # collects the whole suite in a fresh process: seconds
def test_the_reliability_page_states_the_suite_case_count():
    import re
    import subprocess
    import sys

    files = sorted(str(p) for p in (ROOT / "tests" / "adversarial").glob("test_adversarial*.py"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    collected = int(re.search(r"(\d+) tests? collected", done.stdout).group(1))
    stated = re.search(
        r"tests/adversarial/test_adversarial\*\.py`, ([\d,]+) parametrised cases", RELIABILITY
    )
    assert stated and int(stated.group(1).replace(",", "")) == collected, collected


RELIABILITY = (ROOT / "docs" / "reliability.md").read_text()


def test_available_memory_honours_the_address_space_limit():
    """``ulimit -v`` lowers what the estimates compare against (a 3 GB limit, as the battery's)."""
    import subprocess
    import sys

    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30)); "
        "from ihprobe.core.memory import available_bytes; print(available_bytes())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 0 <= int(done.stdout) < 3 * 2**30


def test_sweep_on_a_missing_device_is_refused_before_training(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the sweep would train")
    argv = [
        "sweep",
        "--grid",
        "batch_size=4,8",
        "--out",
        str(tmp_path / "s"),
        "--",
        "--device",
        "cuda",
        "--steps",
        "1",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no CUDA device" in err, err
    assert not (tmp_path / "s" / "runs").exists()


@pytest.mark.slow  # imports datasets in a fresh process: seconds
def test_a_missing_hub_dataset_is_one_line_at_once(tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "IHPROBE_CACHE": str(tmp_path),
    }
    argv = [sys.executable, "-m", "ihprobe", "data-stats", "--dataset", "org/missing"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "org/missing" in done.stderr
