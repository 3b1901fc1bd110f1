"""Hostile and careless input (issue 19): every case is one line on stderr and exit status 2.

Each case copies a tiny GPT-NeoX checkpoint (saved with ``save_pretrained``), breaks it one way,
and runs the real CLI in-process (``ihprobe.cli.main``): the exit status must be 2, stderr one
line naming the problem, with no traceback, no ``.tmp-*`` file and nothing written outside the
output directory. A FIFO and a NaN checkpoint also run as a separate process, where a hang or a
LAPACK crash (segfault, double free) would show. ``hypothesis`` fuzzes the config schema and
safetensors headers (`tests/test_adversarial_fuzz.py`), which must give an ``IhprobeError`` or
pass, never another exception.
The numeric flags of every command are tried in `tests/test_cli_numbers.py`, hostile config.json
files in `tests/test_adversarial_config.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import ihprobe
from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from tests.helpers import (
    cli_refused,
    raw_safetensors,
    save_checkpoint,
    tiny_hf_model,
)

VOCAB = 64
WEIGHTS = "model.safetensors"
QKV = "gpt_neox.layers.0.attention.query_key_value.weight"


# ----------------------------------------------------------------------------- weights


def set_value(ckpt: Path, name: str, value: float, index=(3, 3)) -> None:
    state = load_file(ckpt / WEIGHTS)
    state[name][index] = value
    save_file(state, ckpt / WEIGHTS, metadata={"format": "pt"})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_unembedding_named_before_lapack(ckpt, tmp_path, capsys, monkeypatch, value):
    set_value(ckpt, "embed_out.weight", value)
    argv = ["scan", str(ckpt), "--metrics", "copying"]
    line = cli_refused(argv, tmp_path, capsys, monkeypatch, "tensor embed_out.weight")
    assert "1 NaN/inf value" in line


@pytest.mark.parametrize("command", ["info", "scan", "ablate"])
def test_nan_in_attention_weights_named(ckpt, tmp_path, capsys, monkeypatch, command):
    set_value(ckpt, QKV, float("nan"), index=(0, 0))
    cli_refused([command, str(ckpt)], tmp_path, capsys, monkeypatch, f"tensor {QKV}")


def test_nan_in_half_precision_checkpoint_named(ckpt, tmp_path, capsys, monkeypatch):
    state = {k: v.half() for k, v in load_file(ckpt / WEIGHTS).items()}
    state["gpt_neox.final_layer_norm.bias"][5] = float("inf")
    save_file(state, ckpt / WEIGHTS, metadata={"format": "pt"})
    match = "tensor gpt_neox.final_layer_norm.bias"
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, match)


def keep(ckpt: Path, select) -> None:
    state = load_file(ckpt / WEIGHTS)
    save_file(select(state), ckpt / WEIGHTS, metadata={"format": "pt"})


WRONG_TENSORS = {
    "no tensors": (lambda s: {}, "the config does not match the weights"),
    "no norm tensors": (
        lambda s: {k: v for k, v in s.items() if "norm" not in k},
        "tensors missing",
    ),
    "every key renamed": (lambda s: {f"x.{k}": v for k, v in s.items()}, "tensors missing"),
    "one extra tensor": (lambda s: {**s, "gpt_neox.extra": torch.zeros(2)}, "1 tensors unexpected"),
    "integer weights": (lambda s: {**s, QKV: s[QKV].to(torch.int8)}, f"{QKV} is stored as I8"),
    "one of another shape": (
        lambda s: {**s, QKV: torch.zeros(3, 3)},
        f"1 tensors of another shape than config.json implies ({QKV})",
    ),
}


@pytest.mark.parametrize("case", WRONG_TENSORS)
def test_missing_unexpected_or_reshaped_tensors_cli_refused(
    ckpt, tmp_path, capsys, monkeypatch, case
):
    select, match = WRONG_TENSORS[case]
    keep(ckpt, select)
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, match)


def test_buffers_of_older_checkpoints_are_not_unexpected(tmp_path):
    """GPT-2 checkpoints saved by older transformers: no prefix, causal-mask buffers."""
    ckpt = save_checkpoint(tiny_hf_model("gpt2", vocab_size=VOCAB), tmp_path / "gpt2")
    state = {k.removeprefix("transformer."): v for k, v in load_file(ckpt / WEIGHTS).items()}
    for layer in range(2):
        state[f"h.{layer}.attn.bias"] = torch.ones(1, 1, 128, 128).tril()
        state[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(state, ckpt / WEIGHTS, metadata={"format": "pt"})
    id_tokenizer(VOCAB).save_pretrained(ckpt)
    assert ihprobe.load(ckpt).cfg.n_layers == 2


# ----------------------------------------------------------------------------- safetensors headers


def one_tensor(shape, dtype="F32", offsets=(0, 16)) -> dict:
    return {"w": {"dtype": dtype, "shape": shape, "data_offsets": list(offsets)}}


HEADER_LIES = {
    "shape larger than data": (one_tensor([4, 4]), b"\0" * 16, "needs 64 bytes"),
    "dtype wider than data": (one_tensor([4], "F64"), b"\0" * 16, "needs 32 bytes"),
    "unknown dtype": (one_tensor([4], "F33"), b"\0" * 16, "unknown dtype"),
    "negative offset": (one_tensor([4], offsets=(-16, 0)), b"\0" * 16, "offsets"),
    "overlapping": (
        {**one_tensor([4]), "v": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}},
        b"\0" * 24,
        "overlap",
    ),
    "header is a list": ([], b"", "not an object"),
    "deeply nested": (b"[" * 100_000 + b"]" * 100_000, b"", "corrupt"),
    "header past the end": (one_tensor([4]), b"\0" * 16, "does not fit"),
    "not JSON": (b"\xff\xfe garbage", b"", "corrupt"),
    "shape of strings": (one_tensor(["4"]), b"\0" * 16, "not a list of sizes"),
}


@pytest.mark.parametrize("case", HEADER_LIES)
def test_malformed_safetensors_is_one_line(ckpt, tmp_path, capsys, monkeypatch, case):
    header, data, match = HEADER_LIES[case]
    length = 10**6 if case == "header past the end" else None
    raw_safetensors(ckpt / WEIGHTS, header, data, length)
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, match)


@pytest.mark.parametrize("how", ["empty file", "truncated", "random bytes"])
def test_damaged_weight_file_is_one_line(ckpt, tmp_path, capsys, monkeypatch, how):
    blob = (ckpt / WEIGHTS).read_bytes()
    damaged = {"empty file": b"", "truncated": blob[:-100], "random bytes": os.urandom(4096)}
    (ckpt / WEIGHTS).write_bytes(damaged[how])
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, "corrupt or truncated")


# ----------------------------------------------------------------------------- files


def test_dangling_symlink_cli_refused(ckpt, tmp_path, capsys, monkeypatch):
    (ckpt / WEIGHTS).unlink()
    (ckpt / WEIGHTS).symlink_to(tmp_path / "gone.safetensors")
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, "dangling symlink")


def test_symlink_out_of_the_directory_cli_refused(ckpt, tmp_path, capsys, monkeypatch):
    outside = tmp_path / "work" / "elsewhere.safetensors"
    shutil.move(ckpt / WEIGHTS, outside)
    (ckpt / WEIGHTS).symlink_to(outside)
    cli_refused(
        ["info", str(ckpt)], tmp_path, capsys, monkeypatch, "outside the checkpoint directory"
    )


def test_symlinks_into_an_hf_cache_blobs_load(base, tmp_path):
    repo = tmp_path / "models--org--tiny"
    snapshot, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for i, file in enumerate(sorted(base.iterdir())):
        shutil.copy(file, blobs / f"blob{i}")
        (snapshot / file.name).symlink_to(Path("../../blobs") / f"blob{i}")
    model = ihprobe.load(snapshot)
    assert model.cfg.d_vocab == VOCAB


def test_shard_index_outside_the_directory_cli_refused(ckpt, tmp_path, capsys, monkeypatch):
    elsewhere = tmp_path / "work" / "elsewhere"
    elsewhere.mkdir()
    torch.save(load_file(ckpt / WEIGHTS), elsewhere / "pytorch_model.bin")
    (ckpt / WEIGHTS).unlink()
    torch.save({}, ckpt / "pytorch_model-00001.bin")
    index = {"metadata": {}, "weight_map": {QKV: "../elsewhere/pytorch_model.bin"}}
    (ckpt / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    cli_refused(
        ["info", str(ckpt)], tmp_path, capsys, monkeypatch, "outside the checkpoint directory"
    )


def test_pickle_that_runs_code_is_cli_refused(ckpt, tmp_path, capsys, monkeypatch):
    marker = tmp_path / "work" / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (ckpt / WEIGHTS).unlink()
    torch.save({"x": Payload()}, ckpt / "pytorch_model.bin")
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, "refused to load")
    assert not marker.exists()


def start_process(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "ihprobe", *argv],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow  # two fresh Python processes: seconds
def test_fifo_weights_and_nan_checkpoint_in_a_separate_process(ckpt, tmp_path):
    """A FIFO would block ``open`` forever; NaN in ``eig`` would crash the process."""
    fifo = tmp_path / "work" / "fifo"
    shutil.copytree(ckpt, fifo)
    (fifo / WEIGHTS).unlink()
    os.mkfifo(fifo / WEIGHTS)
    set_value(ckpt, "embed_out.weight", float("nan"))
    cases = {"not a regular file": fifo, "tensor embed_out.weight": ckpt}
    running = {  # both at once: each pays the start-up of torch and transformers
        match: start_process(
            [
                "scan",
                str(source),
                "--metrics",
                "copying",
                "--out",
                str(tmp_path / f"out-{source.name}"),
                "-q",  # no stage lines: a loaded machine may print one before the refusal
            ],
            tmp_path,
        )
        for match, source in cases.items()
    }
    for match, process in running.items():
        try:
            _, stderr = process.communicate(timeout=120)
        finally:
            process.kill()
        assert process.returncode == 2, stderr
        assert stderr.count("\n") == 1 and match in stderr, stderr
    assert not list(tmp_path.glob("out-*"))


def test_the_untouched_checkpoint_still_loads(base, tmp_path, capsys, monkeypatch):
    """The known-good side of every case above: the same CLI accepts the intact copy."""
    monkeypatch.chdir(tmp_path)
    assert main(["info", str(base)]) == 0
    assert (
        main(
            [
                "scan",
                str(base),
                "--metrics",
                "copying,ar_accuracy",
                "--batch",
                "4",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    assert "Traceback" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- numerics


def test_scan_of_a_model_broken_after_loading_names_the_metric(base):
    from ihprobe.probes.battery import scan

    model = ihprobe.load(base)
    tensors = {name.replace("._original_component", ""): p for name, p in model.named_parameters()}
    with torch.no_grad():
        tensors["gpt_neox.final_layer_norm.weight"].fill_(float("nan"))
    # argmax of NaN logits would give a plausible accuracy; 4 rows x 8 queries x VOCAB logits
    match = f"repeated tokens probe: logits holds {4 * 8 * VOCAB} NaN/inf"
    with pytest.raises(IhprobeError, match=match):
        scan(model, ["ar_accuracy"], batch=4, n=8)
    with torch.no_grad():
        tensors["gpt_neox.embed_in.weight"][:, 0] = float("nan")
    with pytest.raises(IhprobeError, match="prefix_matching of head \\(0, 0\\) is nan"):
        scan(model, ["prefix_matching"], batch=4, n=8)
