"""Naming (issue 59, item 19): a folder of models whose names hold digits (``gpt2-124m``) is not
read as a run at steps 124 and 70; ``predict``'s exponent has a name of its own beside ``-B``'s
batch size (``--b-exponent``, ``--b`` kept); the missing-tokenizer hint names the call that
takes a tokenizer (``ihprobe.load``), not the ``scan()`` that rejects one; a ``--text`` folder
with a binary file in it is read, the binary skipped and said (before: the folder refused)."""

from __future__ import annotations

import json
import warnings

import ihprobe
from ihprobe.cli import main
from ihprobe.io.tokenizers import tokenizer_for
from tests.helpers import one_line, save_checkpoint, tiny_hf_model, valid_checkpoint


def test_digits_in_model_names_are_not_steps(tmp_path):
    for name in ("gpt2-124m", "pythia-70m-deduped"):
        valid_checkpoint(tmp_path / "models" / name)
    found = ihprobe.checkpoints(tmp_path / "models")
    assert [c.step for c in found] == [None, None]
    for name in ("checkpoint-500", "step-000020"):
        valid_checkpoint(tmp_path / "run" / name)
    assert [c.step for c in ihprobe.checkpoints(tmp_path / "run")] == [20, 500]


def test_predict_names_its_exponents_apart_from_the_batch_size(capsys):
    base = ["predict", "-B", "8", "-C", "64", "--json"]
    said = []
    for flags in (["--b-exponent", "0.5", "--c-exponent", "0.6"], ["--b", "0.5", "--c", "0.6"]):
        assert main([*base, *flags]) == 0
        said.append(json.loads(capsys.readouterr().out))
    assert said[0] == said[1]
    assert main([*base]) == 0
    assert json.loads(capsys.readouterr().out) != said[0]  # the exponents were read


def test_the_missing_tokenizer_hint_names_ihprobe_load(tmp_path):
    model = tiny_hf_model("gpt-neox", vocab_size=97)
    directory = save_checkpoint(model, tmp_path / "bare")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokenizer_for(directory, model.config)
    said = " ".join(str(w.message) for w in caught)
    assert "ihprobe.load(path, tokenizer=...)" in said and "Pass tokenizer=" not in said


def test_a_text_folder_skips_its_binary_files_and_says_so(tmp_path, caplog):
    from ihprobe.cli import _text

    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.md").write_text("two")
    (tmp_path / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "nul.bin").write_bytes(b"text\x00with a NUL")
    with caplog.at_level("WARNING"):
        assert _text.read_text_option(str(tmp_path)) == ["one", "two"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "skipped 2 file(s) that are not UTF-8 text" in said[0], said
    only_binary = tmp_path / "images"
    only_binary.mkdir()
    (only_binary / "x.png").write_bytes(b"\x89PNG\x00")
    message = one_line(lambda: _text.read_text_option(str(only_binary)))
    assert "holds no UTF-8 text files" in message
    assert "not UTF-8" in one_line(lambda: _text.read_text_option(str(tmp_path / "figure.png")))
