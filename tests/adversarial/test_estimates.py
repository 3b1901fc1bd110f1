"""Estimates that refuse before allocating (issue 59, item 10): ``corpus build --vocab-size 1e9``
ended in SIGABRT from the tokenizers library, which reserves a hash table for the whole
vocabulary at once (70.9 GB). ``core.memory.bpe_bytes`` estimates it; the trainer refuses past
the available memory in one line, and the estimate is checked against the library itself: under
an address-space limit of twice the estimate it trains, under half of it the process dies."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ihprobe.core.memory import bpe_bytes
from ihprobe.data.tokenizer import train_bpe
from tests.helpers import cli_refused, one_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNDER_LIMIT = """
import resource, sys
from ihprobe.core.memory import _status_bytes, bpe_bytes
from ihprobe.data.tokenizer import train_bpe
vocab, factor = int(sys.argv[1]), float(sys.argv[2])
limit = int(_status_bytes("VmSize:") + factor * bpe_bytes(vocab) + 256e6)  # 256 MB: the rest
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
train_bpe(["hello world " * 50], vocab_size=vocab)
print("trained")
"""


def test_a_vocabulary_past_memory_is_one_line_not_an_abort():
    message = one_line(lambda: train_bpe(["hello world"], vocab_size=10**9))
    assert "vocab_size=1000000000 needs about 70.9 GB" in message
    assert "pass a smaller vocab_size" in message


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [2 * 10**7, 5 * 10**7])
def test_the_bpe_estimate_is_within_2x_of_what_the_library_reserves(vocab):
    env = {**os.environ, "IHPROBE_NO_SIZE_LIMITS": "1"}  # the library's own appetite, unchecked
    runs = {
        factor: subprocess.run(
            [sys.executable, "-c", UNDER_LIMIT, str(vocab), str(factor)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        for factor in (2.0, 0.5)
    }
    assert runs[2.0].returncode == 0 and "trained" in runs[2.0].stdout, runs[2.0].stderr[-500:]
    assert runs[0.5].returncode != 0 and "trained" not in runs[0.5].stdout
    assert bpe_bytes(vocab) > 256e6  # the reservation dominates the headroom: the test has teeth


# ---------------------------------------------------------------- every estimate vs its peak
# Each shape runs in a subprocess (one thread, after a warm-up call whose lazy imports are not
# the call's): the peak is the high-water RSS from just before the call (cleared through
# /proc/self/clear_refs) less the RSS there, the estimate the one the call itself checked.
PEAK = """
import gc, json, sys, tempfile
from pathlib import Path
from ihprobe.core import calls, memory
from ihprobe.training import config as training_config

def rss(field):
    with open("/proc/self/status") as handle:
        return next(int(l.split()[1]) * 1024 for l in handle if l.startswith(field))

seen = {"memory": [], "disk": []}
for module in (calls, training_config):
    work = module.check_work
    module.check_work = lambda what, found, work=work, **kw: (
        seen["memory"].append(found.bytes), work(what, found, **kw))
disk = training_config.check_disk
training_config.check_disk = lambda what, found, *a, **kw: (
    seen["disk"].append(found), disk(what, found, *a, **kw))

def train(spec):
    from ihprobe.training.config import TrainConfig
    from ihprobe.training.trainer import train
    with tempfile.TemporaryDirectory() as folder:
        run = train(TrainConfig(out=folder + "/run", progress=False, producer="iid", **spec))
        return sum(f.stat().st_size for f in Path(run).rglob("*") if f.is_file())

def probe(spec):
    import ihprobe
    from ihprobe.io.any_model import as_model
    from ihprobe.io.architectures import build_model
    from ihprobe.training.config import TrainConfig
    shape = TrainConfig(**spec.pop("shape"))
    model = as_model(build_model(shape, spec.pop("vocab")), copy=False)
    getattr(ihprobe, spec.pop("call"))(model, **spec)

kind, specs = sys.argv[1], json.loads(sys.argv[2])
for spec in specs:
    gc.collect()
    memory.release_freed()
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # the high-water mark from here
    start = rss("VmRSS:")
    seen["memory"].clear(), seen["disk"].clear()
    written = (train if kind == "train" else probe)(dict(spec))
    found = {"peak": rss("VmHWM:") - start, "estimate": max(seen["memory"])}
    if written:
        found.update(written=written, disk=max(seen["disk"]))
    print(json.dumps(found), flush=True)
"""
NARROW = {"d_model": 8, "heads": 1, "steps": 2, "n_checkpoints": 1}
SMALL = {"layers": 2, "heads": 4, "d_model": 64, "context": 64}
# One shape per term of ``core.memory.estimate`` and ``checkpoint_disk``, each sized so that its
# term dominates the peak (a second size of the same term measured nothing new).
GRIDS = {
    "train": {
        "warm-up": {"layers": 1, "d_model": 16, "heads": 1, "steps": 1, "batch_size": 2},
        # LAYER_BYTES: 150 layers, next to no activations
        "deep narrow, B1 C4": {"layers": 150, **NARROW, "batch_size": 1, "context": 4},
        # the activations kept for backward, over those layers
        "deep narrow, B8 C64": {"layers": 150, **NARROW, "batch_size": 8, "context": 64},
        # weights, gradients, AdamW's moments and TRAIN_LOGIT_COPIES of the B x C x vocab logits
        "vocab 50k": {
            **{"producer_options": {"vocab_size": 50_000}, "batch_size": 4, "context": 32},
            **{"steps": 2, "n_checkpoints": 1},
        },
        # checkpoint_disk's checkpoints beside the resume state
        "7 checkpoints": {
            **{"producer_options": {"vocab_size": 20_000}, "batch_size": 2, "context": 16},
            **{"steps": 6, "checkpoints": "linear", "n_checkpoints": 6},
        },
    },
    "probe": {
        "warm-up": {"call": "scan", "shape": SMALL, "vocab": 512, "batch": 4, "n": 10},
        # ROW_BYTES of 4000 rows, in passes of 25 (PASS_TOKENS' activations)
        "scan batch 4000, chunk 25": {
            **{"call": "scan", "shape": SMALL, "vocab": 8192, "batch": 4000, "n": 10},
            **{"chunk": 25, "metrics": ["prefix_matching"]},
        },
        # GROUP_BYTES of 1000 ablated groups: a heap that grew with the draws fails here
        "ablate 1000 draws": {
            **{"call": "ablate", "shape": SMALL, "vocab": 512, "draws": 1000},
            **{"batch": 10, "n": 10, "metrics": ["ar_accuracy"]},
        },
    },
}


@pytest.mark.slow
def test_each_estimate_is_within_2x_of_the_measured_peak():
    """Each term's estimate (memory, and disk for a training run) lies within 2x of what the
    run took, on every shape of :data:`GRIDS`: a constant of ``core.memory`` that drifts from
    the libraries' appetite fails here. One test (one worker) for the whole grid."""
    if not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("no /proc/self/clear_refs here: the peak of one call cannot be isolated")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "IHPROBE_NO_SIZE_LIMITS": "0"}
    running = {
        kind: subprocess.Popen(
            [sys.executable, "-c", PEAK, kind, json.dumps(list(grid.values()))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for kind, grid in GRIDS.items()
    }  # both at once: one core each
    wrong = []
    for kind, process in running.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        lines = [json.loads(line) for line in out.splitlines()]
        for name, found in zip(GRIDS[kind], lines, strict=True):
            if name == "warm-up":
                continue
            ratios = [found["estimate"] / found["peak"]]
            if "written" in found:  # a training run: what it wrote, against check_disk's
                ratios.append(found["disk"] / found["written"])
            if found["peak"] < 20e6 or not all(0.5 <= r <= 2 for r in ratios):
                wrong.append(f"{name}: {found}")  # 20 MB: the shape's own, above the noise
    assert not wrong, wrong


# ---------------------------------------------------------------- refused in one line, early
GB = 10**9
REFUSED = {  # argv -> what the one line names (memory capped at 2 GB)
    "deep narrow": (["train", "--layers", "100000", "--d-model", "8", "--heads", "1"], "GB but"),
    "vocabulary 5e6": (["train", "--producer", "iid", "--option", "vocab_size=5000000"], "GB but"),
    "vocabulary 5e7": (["train", "--producer", "iid", "--option", "vocab_size=50000000"], "GB but"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_training_past_memory_is_one_line_before_any_tensor(case, tmp_path, capsys, monkeypatch):
    """The check runs before the producer and the model: nothing is built (a 2 GB cap)."""
    from ihprobe.core import memory
    from ihprobe.training import trainer

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 2 * GB)
    built = []
    monkeypatch.setattr(trainer, "make_run_producer", lambda *a, **k: built.append(a))
    argv, match = REFUSED[case]
    cli_refused([*argv, "--out", str(tmp_path / "out")], tmp_path, capsys, monkeypatch, match)
    assert not built and not (tmp_path / "out").exists()


def test_checkpoints_past_the_free_disk_are_one_line(tmp_path, capsys, monkeypatch):
    from collections import namedtuple

    from ihprobe.core import memory

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(memory.shutil, "disk_usage", lambda path: usage(GB, GB, 10**6))
    line = cli_refused(
        ["train", "--n-checkpoints", "50", "--steps", "100", "--out", str(tmp_path / "out")],
        tmp_path,
        capsys,
        monkeypatch,
        "GB of disk but",
    )
    assert "--n-checkpoints" in line and not (tmp_path / "out").exists()


def test_the_disk_estimate_counts_only_the_checkpoints_a_resume_adds(tmp_path):
    from ihprobe.training.config import TrainConfig, _new_checkpoints

    config = TrainConfig(out=str(tmp_path), steps=10, checkpoints="linear", n_checkpoints=5)
    assert _new_checkpoints(config) == [0, 2, 4, 6, 8, 10]
    (tmp_path / "checkpoints" / "step-000004").mkdir(parents=True)
    assert _new_checkpoints(config) == [0, 2, 6, 8, 10]


@pytest.mark.parametrize(
    "argv", [["scan", "--batch", "1000000", "--chunk", "25"], ["ablate", "--draws", "1000000"]]
)
def test_probe_rows_and_draws_past_memory_are_one_line(argv, base, tmp_path, capsys, monkeypatch):
    """``scan --batch 1e6 --chunk 25`` (its rows are drawn whole; chunks bound only the passes)
    and ``ablate --draws 1e6`` (a draw, its mask and its values per row) under a 1 GB cap."""
    from ihprobe.core import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": GB)
    line = cli_refused([argv[0], str(base), *argv[1:]], tmp_path, capsys, monkeypatch, "GB but")
    assert ("batch" if argv[0] == "scan" else "random") in line
