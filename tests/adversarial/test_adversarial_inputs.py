"""Hostile checkpoints, run directories and CLI values (issue 28): one line, exit status 2.

* Configs are checked as transformers fills them in: a config saying only ``"model_type":
  "llama"`` beside GPT-2 weights (a default 32-layer, 4096-wide Llama, 26 GB) and configs whose
  intermediate size, positions or vocabulary dwarf the weights are refused before anything is
  built; a model larger than the available memory is refused with the estimate, and
  ``IHPROBE_NO_SIZE_LIMITS=1`` lets it through.
* Every command that reads a checkpoint's weights verifies the checksums ``ihprobe.json``
  records (``info`` and ``emergence`` on a run included): an edited file with the old checksum
  kept, a FIFO, a link out of the run, ``../`` names and malformed fields are refused.
* float8, float16, bfloat16 and float64 weights load and score (float8 had no ``aminmax``).
* The slow tests fuzz the CLI in-process (400 seeded cases) and run a sample as processes,
  where a hang, a crash or memory exhaustion would show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import ihprobe
from ihprobe.cli import main
from ihprobe.core import memory
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.weights import weight_checksums
from tests.fixtures import save_checkpoint, tiny_hf_model

VOCAB = 64
WEIGHTS = "model.safetensors"
MEMORY_CAP = 64 * 2**20


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("gpt2") / "ckpt"
    hf = tiny_hf_model("gpt2", vocab_size=VOCAB, d_model=32, context=64)
    return save_checkpoint(hf, directory, id_tokenizer(VOCAB))


@pytest.fixture(scope="module")
def run(tmp_path_factory, gpt2) -> Path:
    """A run directory as the trainer writes it: two checkpoints with step, tokens, sha256."""
    root = tmp_path_factory.mktemp("run") / "run"
    for step in (0, 10):
        checkpoint = root / "checkpoints" / f"step-{step:06d}"
        shutil.copytree(gpt2, checkpoint)
        meta = {"step": step, "tokens": 640 * step, "sha256": weight_checksums(checkpoint)}
        (checkpoint / "ihprobe.json").write_text(json.dumps(meta))
    return root


def copy(source: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(source, tmp_path / source.name, symlinks=True))


def cli_refuses(argv: list[str], capsys) -> str:
    """Run the CLI in-process; exit 2 and one error line (stage lines aside), no traceback."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]  # besides stage lines
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, (code, err[-2000:])
    return errors[0]


# ----------------------------------------------------------------------------- configs


def edit_config(directory: Path, edit) -> None:
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(edit(config)))


CONFIGS = {
    "only model_type llama": lambda c: {"model_type": "llama"},
    "intermediate size 1e7": lambda c: {**c, "n_inner": 10_000_000},
    "max positions 1e8": lambda c: {**c, "n_positions": 100_000_000},
    "vocabulary 9e6": lambda c: {**c, "vocab_size": 9_000_000},
    "64 layers": lambda c: {**c, "n_layer": 64},
}


@pytest.mark.parametrize("case", CONFIGS)
def test_config_that_dwarfs_its_weights_is_refused_before_building(gpt2, tmp_path, case):
    directory = copy(gpt2, tmp_path)
    edit_config(directory, CONFIGS[case])
    with pytest.raises(IhprobeError, match="the config does not match the weights") as err:
        ihprobe.load(directory)
    assert "\n" not in str(err.value)


def test_model_larger_than_memory_is_refused_unless_overridden(gpt2, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 10_000)
    with pytest.raises(IhprobeError, match=r"building .* needs about .* GB but"):
        ihprobe.load(gpt2)
    monkeypatch.setenv(memory.SIZE_LIMIT_ENV, "1")
    assert ihprobe.load(gpt2).cfg.n_layers == 2


@pytest.mark.parametrize(
    "dtype", ["float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float64"]
)
def test_other_dtypes_load_and_score(gpt2, tmp_path, dtype):
    directory = copy(gpt2, tmp_path)
    state = load_file(directory / WEIGHTS)
    converted = {k: v.to(getattr(torch, dtype)) for k, v in state.items()}
    save_file(converted, directory / WEIGHTS, metadata={"format": "pt"})
    scores = ihprobe.scan(ihprobe.load(directory), "previous_token", batch=4)
    assert torch.isfinite(scores.head["previous_token"]).all()


# ----------------------------------------------------------------------------- run directories


def flip_a_weight_byte(checkpoint: Path) -> None:
    data = bytearray((checkpoint / WEIGHTS).read_bytes())
    data[-3] ^= 1  # inside the last tensor: the header stays valid
    (checkpoint / WEIGHTS).write_bytes(bytes(data))


def fifo_for_weights(checkpoint: Path) -> None:
    (checkpoint / WEIGHTS).unlink()
    os.mkfifo(checkpoint / WEIGHTS)


def link_out_of_the_run(checkpoint: Path) -> None:
    outside = checkpoint.parent.parent.parent / "outside.safetensors"
    shutil.move(checkpoint / WEIGHTS, outside)
    os.symlink(outside, checkpoint / WEIGHTS)


def meta_edit(edit):
    def apply(checkpoint: Path) -> None:
        meta = json.loads((checkpoint / "ihprobe.json").read_text())
        edit(meta)
        (checkpoint / "ihprobe.json").write_text(json.dumps(meta))

    return apply


RUN_FAULTS = {
    "edited, checksum kept": (flip_a_weight_byte, "does not match the SHA-256"),
    "FIFO as weights": (fifo_for_weights, "not a regular file"),
    "link out of the run": (link_out_of_the_run, "outside the checkpoint directory"),
    "sha256 name with ../": (
        meta_edit(lambda m: m["sha256"].update({"../../../outside": "0" * 64})),
        "not a file of the checkpoint",
    ),
    "sha256 a list": (meta_edit(lambda m: m.update(sha256=[1])), "sha256 must map"),
    "sha256 too short": (
        meta_edit(lambda m: m.update(sha256={WEIGHTS: "abc"})),
        "not 64 hex digits",
    ),
    "step a word": (meta_edit(lambda m: m.update(step="ten")), "step must be"),
    "tokens negative": (meta_edit(lambda m: m.update(tokens=-5)), "tokens must be"),
    "meta a list": (lambda c: (c / "ihprobe.json").write_text("[1]"), "not an object"),
}


@pytest.mark.parametrize("command", ["info", "emergence"])
@pytest.mark.parametrize("fault", RUN_FAULTS)
def test_run_directory_faults_are_one_line(run, tmp_path, capsys, command, fault):
    broken = copy(run, tmp_path)
    break_it, match = RUN_FAULTS[fault]
    break_it(broken / "checkpoints" / "step-000010")
    assert match in cli_refuses([command, str(broken)], capsys)


def test_edited_checkpoint_is_refused_by_load_and_info(run, tmp_path, capsys):
    broken = copy(run, tmp_path)
    checkpoint = broken / "checkpoints" / "step-000010"
    flip_a_weight_byte(checkpoint)
    assert "SHA-256" in cli_refuses(["info", str(checkpoint)], capsys)
    with pytest.raises(IhprobeError, match="SHA-256"):
        ihprobe.load(checkpoint)


def test_clean_run_is_listed(run, capsys):
    capsys.readouterr()
    assert main(["info", str(run)]) == 0
    assert "step-000010" in capsys.readouterr().out


# ----------------------------------------------------------------------------- CLI fuzz

BAD_COUNT_TEXT = ("0", "-1", "1.5", "nan", "inf", "", "x", "1e999", "99999999999999999999999")
HUGE_COUNT_TEXT = ("1000000", "1000000000", "1e9")  # integers that exhaust memory
CLI_FLAGS = {
    ("scan", "--batch"): BAD_COUNT_TEXT + HUGE_COUNT_TEXT,
    ("scan", "--seed"): ("-1", "1.5", "nan", "x", "", "9223372036854775808", "1e400"),
    ("scan", "--chunk"): BAD_COUNT_TEXT,
    ("scan", "--show"): BAD_COUNT_TEXT,
    ("ablate", "--draws"): BAD_COUNT_TEXT + HUGE_COUNT_TEXT,
    ("ablate", "--batch"): BAD_COUNT_TEXT + HUGE_COUNT_TEXT,
    ("ablate", "--top"): ("0", "-1", "nan", "inf", "x", ""),
    ("ablate", "--seed"): ("-1", "1.5", "x", "9223372036854775808"),
    ("composition", "--draws"): BAD_COUNT_TEXT + HUGE_COUNT_TEXT + ("1",),
    ("composition", "--seed"): ("-1", "1.5", "x", "9223372036854775808"),
    ("patch", "--batch"): BAD_COUNT_TEXT + HUGE_COUNT_TEXT,
    ("patch", "--sender"): ("5.0", "0.-1", "0.9", "x", "", "0", "0.0.0", "-1.0"),
    ("patch", "--receiver"): ("5.0", "1.-1", "1.9", "x", "", "1"),
}


def cli_cases() -> st.SearchStrategy:
    """(command, flag, value): a listed bad value, or a generated non-positive, fractional or
    past-int64 number for the count flags."""
    keys = sorted(CLI_FLAGS)
    generated = st.one_of(
        st.integers(max_value=0).map(str),
        st.integers(min_value=2**63, max_value=10**30).map(str),
        st.floats(allow_nan=True, allow_infinity=True)
        .filter(lambda f: not f.is_integer())
        .map(repr),
    )

    def values(key):
        listed = st.sampled_from(CLI_FLAGS[key])
        counting = key[1] in ("--batch", "--random", "--draws", "--chunk")
        return st.tuples(st.just(key), listed | generated if counting else listed)

    return st.sampled_from(keys).flatmap(values)


@pytest.mark.slow
@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cli_cases())
def test_fuzz_cli_in_process(gpt2, tmp_path, capsys, case):
    (command, flag), value = case
    argv = [command, str(gpt2), f"{flag}={value}", "--out", str(tmp_path / "out"), "--force"]
    with mock.patch.object(memory, "available_bytes", lambda device="cpu": MEMORY_CAP):
        cli_refuses(argv, capsys)


@pytest.mark.slow
def test_cli_sample_as_processes(gpt2, run, tmp_path):
    """A sample as real processes: a hang, a crash or memory exhaustion would show here."""
    fifo_run = copy(run, tmp_path)
    fifo_for_weights(fifo_run / "checkpoints" / "step-000010")
    llama = copy(gpt2, tmp_path / "llama")
    edit_config(llama, CONFIGS["only model_type llama"])
    out = str(tmp_path / "out")
    sample = [
        ["scan", str(gpt2), "--seed", str(2**64), "--out", out],
        ["ablate", str(gpt2), "--draws", "1000000000000", "--out", out],
        ["composition", str(gpt2), "--draws", "1000000000", "--out", out],
        ["info", str(fifo_run)],
        ["emergence", str(fifo_run)],
        ["info", str(llama)],
        ["scan", str(llama), "--out", out],
        ["patch", str(gpt2), "--sender", "5.0", "--out", out],
    ]
    for argv in sample:
        done = subprocess.run(
            [sys.executable, "-m", "ihprobe", *argv], capture_output=True, text=True, timeout=120
        )
        lines = [line for line in done.stderr.splitlines() if "error:" in line]
        assert done.returncode == 2 and len(lines) == 1, (argv, done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (argv, done.stderr[-2000:])
