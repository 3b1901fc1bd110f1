"""Never delete what is not ours, checksum what decides the numbers, read user files with care
(issue 45). Each case states its outcome: one ``IhprobeError`` line (exit status 2 through the
CLI), a documented warning, or a result checked against a reference.

* Output folders: ``corpus build`` and ``train`` refuse ``''``, ``.``, ``~``, the current and
  home folders, a file, a name over 255 bytes and a folder holding a user's file (which is still
  there afterwards); a folder ihprobe marked, an older corpus and a run folder are accepted.
* ``ihprobe.json`` format 2 hashes config, tokenizer and weights: each config edit the issue
  lists (all keep every tensor shape), a tokenizer edit and an added tokenizer file are refused on
  load; format 1 (weights only) still loads; the committed reference verifies, and an edited copy
  of it is refused.
* Files and folders ihprobe writes take the user's umask.
* Task files, producer text options and ``run.json``: bad bytes, empty lists, FIFOs, extension
  entries such as ``"x"`` and JSON nested too deep are one line; a Latin-1 byte in a corpus file
  is a documented warning.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from pathlib import Path

import pytest

import ihprobe
from ihprobe.cli import main
from ihprobe.core.files import atomic_directory, atomic_write
from ihprobe.core.outputs import check_output_folder, mark
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.runs import checkpoint_meta, run_meta
from ihprobe.io.weights import CHECKSUM_FORMAT, checkpoint_checksums, verify_checksums
from ihprobe.training.config import TrainConfig
from tests.fixtures import save_checkpoint, tiny_hf_model
from tests.helpers import one_line

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference" / "natural-docs"
LONG = "x" * 300


# ----------------------------------------------------------------------------- output folders


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "thesis.txt").write_text("work")
    return folder


OUTS = {
    "empty name": lambda tmp: "",
    "dot": lambda tmp: ".",
    "tilde": lambda tmp: "~",
    "root": lambda tmp: "/",
    "current folder": lambda tmp: str(Path.cwd()),
    "home folder": lambda tmp: str(Path.home()),
    "a user's folder": lambda tmp: str(user_folder(tmp)),
    "a file": lambda tmp: str(user_folder(tmp) / "thesis.txt"),
    "a name over 255 bytes": lambda tmp: str(tmp / LONG),
    "a copy of a checkpoint": lambda tmp: str(shutil.copytree(REFERENCE, tmp / "copy")),
}
WRITERS = {
    "corpus": lambda out: ihprobe_corpus(out),
    "train": lambda out: ihprobe.train(TrainConfig(out=out, producer="iid", steps=1)),
    "check_output_folder": lambda out: check_output_folder(out),
}


def ihprobe_corpus(out):
    from ihprobe.data.installed_docs import build_docs_corpus

    return build_docs_corpus(out, sources=("git",), vocab_size=300)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("out", OUTS)
def test_output_folders_that_are_not_ours_are_refused(tmp_path, writer, out):
    target = OUTS[out](tmp_path)
    folder = Path(target).expanduser()
    before = (
        sorted(os.listdir(folder)) if out != "a name over 255 bytes" and folder.is_dir() else None
    )
    message = one_line(lambda: WRITERS[writer](target))
    assert any(w in message for w in ("folder", "bytes long", "a file")), message
    if (tmp_path / "mydata").is_dir():
        assert (tmp_path / "mydata" / "thesis.txt").read_text() == "work"
    if before is not None:
        assert sorted(os.listdir(folder)) == before  # nothing added


@pytest.mark.parametrize("command", ["corpus build", "train --producer iid --steps 1"])
@pytest.mark.parametrize("out", ["", ".", "~", "mydata"])
def test_cli_output_folders_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, command, out):
    monkeypatch.chdir(tmp_path)
    user_folder(tmp_path)
    assert main([*command.split(), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "folder" in err, err
    assert (tmp_path / "mydata" / "thesis.txt").read_text() == "work"


def test_folders_ihprobe_made_are_accepted(tmp_path):
    marked, older, run, empty = (tmp_path / n for n in ("marked", "older", "run", "empty"))
    for folder in (marked, older, run, empty):
        folder.mkdir()
    mark(marked, "corpus")
    (marked / "train").mkdir()
    assert check_output_folder(marked, kind="corpus") == marked
    one_line(lambda: check_output_folder(marked, kind="run"))  # marked as another kind
    from ihprobe.data.installed_docs import _older_corpus

    manifest = {"sources": {}, "splits": {}, "held_out_percent": 5, "tokens": {}}
    (older / "manifest.json").write_text(json.dumps(manifest))
    (older / "tokenizer-bpe300").mkdir()
    assert check_output_folder(older, kind="corpus", ours=_older_corpus) == older
    (older / "thesis.txt").write_text("work")  # a user's file beside it: no longer ours
    one_line(lambda: check_output_folder(older, kind="corpus", ours=_older_corpus))
    (run / "run.json").write_text(json.dumps({"config": {}}))
    from ihprobe.training.resume import check_run_folder

    check_run_folder(TrainConfig(out=str(run), resume=True))
    check_run_folder(TrainConfig(out=str(empty)))
    (empty / ".lock").write_text("1 host")  # no marker: a file named .lock is the user's
    one_line(lambda: check_run_folder(TrainConfig(out=str(empty))))
    mark(empty, "run")  # what a run's lock writes first: its .lock is then ihprobe's
    check_run_folder(TrainConfig(out=str(empty)))


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_written_files_and_folders_take_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        file = atomic_write(tmp_path / "a.json", "{}")
        with atomic_directory(tmp_path / "ckpt") as tmp:
            (tmp / "x").write_text("1")
    finally:
        os.umask(old)
    assert stat.S_IMODE(file.stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "ckpt").stat().st_mode) == 0o777 & ~mask


# ----------------------------------------------------------------------------- checksums


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A tiny GPT-NeoX checkpoint whose ihprobe.json (format 2) hashes what the trainer hashes."""
    directory = save_checkpoint(
        tiny_hf_model("gpt-neox", vocab_size=64, d_model=32, context=64),
        tmp_path / "ckpt",
        id_tokenizer(64),
    )
    meta = {"step": 0, "format": CHECKSUM_FORMAT, "sha256": checkpoint_checksums(directory)}
    (directory / "ihprobe.json").write_text(json.dumps(meta))
    return directory


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, **changes}, indent=2))


CONFIG_EDITS = {
    "num_attention_heads 8": {"num_attention_heads": 8},
    "num_attention_heads 2": {"num_attention_heads": 2},
    "rotary_pct": {"rotary_pct": 0.5},
    "partial_rotary_factor": {"partial_rotary_factor": 0.5},
    "rope_theta": {"rope_theta": 1234.0},
    "use_parallel_residual": {"use_parallel_residual": False},
    "hidden_act": {"hidden_act": "relu"},
    "max_position_embeddings": {"max_position_embeddings": 32},
    "a new key": {"ihprobe_note": "edited"},
    "whitespace only": {},
}


@pytest.mark.parametrize("edit", CONFIG_EDITS)
def test_config_edits_that_keep_every_shape_are_refused(checkpoint, edit):
    edit_config(checkpoint, **CONFIG_EDITS[edit])
    assert "does not match" in one_line(lambda: verify_checksums(checkpoint))


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_tokenizer_edits_are_refused(checkpoint, name):
    with open(checkpoint / name, "a") as fh:
        fh.write(" ")
    assert "does not match" in one_line(lambda: verify_checksums(checkpoint))


@pytest.mark.parametrize("name", ["special_tokens_map.json", "vocab.json", "merges.txt"])
def test_tokenizer_files_added_later_are_refused(checkpoint, name):
    (checkpoint / name).write_text("{}")
    assert "not recorded" in one_line(lambda: verify_checksums(checkpoint))


def test_an_edited_checkpoint_is_refused_by_load_and_info(checkpoint, capsys):
    edit_config(checkpoint, num_attention_heads=8)
    one_line(lambda: ihprobe.load(checkpoint))
    assert main(["info", str(checkpoint)]) == 2
    assert "does not match" in capsys.readouterr().err


def test_format_1_checkpoints_hash_only_their_weights_and_still_load(checkpoint):
    """The documented rule: without a ``format`` field only the recorded weights are checked."""
    sums = checkpoint_checksums(checkpoint)
    meta = {"step": 0, "sha256": {"model.safetensors": sums["model.safetensors"]}}
    (checkpoint / "ihprobe.json").write_text(json.dumps(meta))
    edit_config(checkpoint, ihprobe_note="edited")
    verify_checksums(checkpoint)
    assert ihprobe.load(checkpoint).cfg.n_heads == 4


def test_the_committed_reference_verifies_and_an_edited_copy_is_refused(tmp_path):
    verify_checksums(REFERENCE)
    meta = checkpoint_meta(REFERENCE)
    assert meta["format"] == CHECKSUM_FORMAT and meta["sha256"] == checkpoint_checksums(REFERENCE)
    copy = shutil.copytree(REFERENCE, tmp_path / "reference")
    edit_config(copy, num_attention_heads=8)
    assert "config.json does not match" in one_line(lambda: verify_checksums(copy))


# ----------------------------------------------------------------------------- user files


TASK_FILES = {
    "binary": b"\x00\xff\xfe\x80\x81",
    "latin-1": "caf\xe9\tcoffee\nth\xe9\ttea\n".encode("latin-1"),
    "empty": b"",
    "one pair": b"a\tb\n",
    "not pairs": b"[1, 2, 3]",
    "json object without pairs": b'{"name": "x"}',
}


@pytest.mark.parametrize("case", TASK_FILES)
def test_bad_task_files_are_one_line(tmp_path, case):
    from ihprobe.causal.tasks import read_task

    path = tmp_path / ("task.json" if case.startswith(("not", "json")) else "task.tsv")
    path.write_bytes(TASK_FILES[case])
    one_line(lambda: read_task(path))


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing"])
def test_task_paths_that_are_not_files_are_one_line(tmp_path, kind):
    from ihprobe.causal.tasks import read_task

    path = tmp_path / "task.tsv"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    assert "task file" in one_line(lambda: read_task(path))


def test_cli_ablate_reads_task_files_before_loading(tmp_path, capsys):
    bad = tmp_path / "task.tsv"
    bad.write_bytes(b"\xff\xfe\x00")
    for task in (str(bad), str(tmp_path / "missing.tsv")):
        assert main(["ablate", "org/never-loaded", "--task", task]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "task file" in err, err


TEXT_OPTIONS = {
    "empty list": [],
    "list of a number": [3],
    "empty string entry": [""],
    "a number": 3,
    "a dict": {"a": 1},
    "no such file": "/no/such/text/file.txt",
}


@pytest.mark.parametrize("case", TEXT_OPTIONS)
def test_bad_text_options_are_one_line(case):
    one_line(
        lambda: ihprobe.make_producer("natural", batch_size=2, context=16, text=TEXT_OPTIONS[case])
    )


def test_fifos_in_a_text_folder_are_skipped_not_read(tmp_path):
    from ihprobe.data.text import _expand

    (tmp_path / "good.txt").write_text("some text")
    os.mkfifo(tmp_path / "pipe.txt")
    assert [p.name for p in _expand(str(tmp_path))] == ["good.txt"]
    only_fifo = tmp_path / "fifo-only"
    only_fifo.mkdir()
    os.mkfifo(only_fifo / "pipe.txt")
    assert "no text files" in one_line(
        lambda: ihprobe.make_producer("natural", batch_size=2, context=16, text=str(only_fifo))
    )


def test_a_latin1_byte_in_a_corpus_file_is_a_documented_warning(tmp_path, caplog):
    from ihprobe.data.text import _decoded

    path = tmp_path / "doc.txt"
    path.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with caplog.at_level(logging.WARNING):
        assert _decoded(path) == "caf\ufffd au lait"
    assert "is not UTF-8" in caplog.text and str(path) in caplog.text


@pytest.mark.parametrize("command", ["data-stats", "train"])
def test_a_binary_text_file_is_refused_by_the_text_producer_in_one_line(tmp_path, capsys, command):
    """A named file with NUL bytes (an image passed by mistake) gives no statistics and trains
    nothing, where a stray Latin-1 byte is read with a warning."""
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 40)
    args = ["--text", str(image), "-q"]
    if command == "train":  # the producer's option, as train spells it
        args = ["--option", f"text={image}", "-q", "--out", str(tmp_path / "run"), "--steps", "2"]
    assert main([command, *args]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"{image} is a binary file" in line and "pass text files" in line
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").rglob("*.safetensors"))


RUN_JSON = {
    "extension x": {"config": {}, "steps": 10, "extensions": ["x"]},
    "extensions a string": {"config": {}, "extensions": "x"},
    "extension with a string step": {
        "config": {},
        "extensions": [{"from_steps": "a", "to_steps": 2, "from_tokens": 0, "to_tokens": 1}],
    },
    "steps a string": {"config": {}, "steps": "a"},
    "steps negative": {"config": {}, "steps": -1},
    "checkpoint_steps a string": {"config": {}, "checkpoint_steps": "x"},
    "checkpoint_steps floats": {"config": {}, "checkpoint_steps": [1.5]},
    "no config": {"steps": 3},
    "a list": [1, 2],
}
RUN_BYTES = {
    "nested too deep": b"[" * 100_000 + b"]" * 100_000,
    "not JSON": b"{steps: 3",
    "latin-1 bytes": b'{"config": {"a": "\xe9"}}',
}


@pytest.mark.parametrize("case", [*RUN_JSON, *RUN_BYTES])
def test_damaged_run_json_is_one_line(tmp_path, case):
    data = RUN_BYTES.get(case) or json.dumps(RUN_JSON[case]).encode()
    (tmp_path / "run.json").write_bytes(data)
    assert "run.json" in one_line(lambda: run_meta(tmp_path))


def test_resume_of_a_run_with_extension_x_is_one_line(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({"config": {}, "extensions": ["x"]}))
    assert main(["train", "--out", str(tmp_path), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "extensions[0]" in err, err


@pytest.mark.parametrize("case", ["nested too deep", "not JSON"])
def test_damaged_ihprobe_json_is_one_line(tmp_path, case):
    (tmp_path / "ihprobe.json").write_bytes(RUN_BYTES[case])
    one_line(lambda: checkpoint_meta(tmp_path))
