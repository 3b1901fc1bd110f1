"""`ihprobe train`'s options are made from TrainConfig's fields (issue 58, item 7): one source of
truth for every training option's name, type, default and help; a field added to TrainConfig is
on the command line with no second edit."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from ihprobe.cli import build_parser, main
from ihprobe.cli import train as train_cli
from ihprobe.cli._common import SHORTCUTS
from ihprobe.training import config as config_module
from ihprobe.training.config import TrainConfig

NOT_FIELDS = {"help", "option", "threads", *(flag.replace("-", "_") for flag, _, _ in SHORTCUTS)}


def _train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train"]


def _patched(monkeypatch) -> type:
    """TrainConfig with two more fields, as a developer would add them: an int with help and a
    bool, each with nothing else written anywhere."""
    extra = dataclasses.make_dataclass(
        "TrainConfig",
        [
            ("warmup_floor", int, config_module.option(7, "updates before warm-up starts")),
            ("stash_grads", bool, config_module.option(False, "keep the last gradients")),
        ],
        bases=(TrainConfig,),
        frozen=True,
    )
    monkeypatch.setattr(config_module, "TrainConfig", extra)
    return extra


def test_every_field_has_its_flag_and_every_flag_is_a_field():
    actions = [a for a in _train_parser()._actions if a.option_strings]
    dests = {a.dest for a in actions} - NOT_FIELDS
    fields = {f.name for f in dataclasses.fields(TrainConfig)} - {"producer_options"}
    assert dests == fields
    for action in actions:  # the flag's parser is the field's, its choices the field's
        if action.dest in fields:
            spec = next(f for f in dataclasses.fields(TrainConfig) if f.name == action.dest)
            assert action.choices == spec.metadata.get("choices"), action.dest
            if "parse" in spec.metadata:
                assert action.type is train_cli.PARSERS[spec.metadata["parse"]], action.dest


def test_a_field_added_to_trainconfig_is_on_the_command_line(monkeypatch, capsys, tmp_path):
    extra = _patched(monkeypatch)
    assert main(["train", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # the help, its line breaks undone
    assert "--warmup-floor WARMUP_FLOOR updates before warm-up starts (default: 7)" in shown
    assert "--stash-grads keep the last gradients" in shown
    argv = ["train", "--out", str(tmp_path / "r"), "--warmup-floor", "3", "--stash-grads"]
    config = train_cli.config_from_args(build_parser().parse_args(argv))
    assert type(config) is extra and (config.warmup_floor, config.stash_grads) == (3, True)
    assert config.lr == TrainConfig().lr  # the flags not given keep the field's default


def test_a_bad_value_for_an_added_field_is_one_line(monkeypatch, capsys, tmp_path):
    _patched(monkeypatch)
    assert main(["train", "--out", str(tmp_path / "r"), "--warmup-floor", "seven"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'seven' is not an integer" in err, err


def test_the_flags_without_the_default_name_and_the_kinds_the_annotation_gives():
    by_dest = {a.dest: a for a in _train_parser()._actions if a.option_strings}
    assert by_dest["context"].option_strings == ["-C", "--context"]
    assert by_dest["batch_size"].option_strings == ["-B", "--batch-size"]
    assert by_dest["progress"].option_strings == ["-q", "--quiet", "--no-progress"]
    assert isinstance(by_dest["progress"], argparse._StoreFalseAction)
    assert isinstance(by_dest["live_probes"], argparse._StoreTrueAction)
    assert by_dest["law_from"].nargs == "+" and by_dest["out"].required
    args = build_parser().parse_args(["train", "--out", "x", "--law-from", "a", "b", "-q"])
    config = train_cli.config_from_args(args)
    assert config.law_from == ("a", "b") and config.progress is False
    with pytest.raises(SystemExit):  # --steps and --tokens exclude each other, as before
        build_parser().parse_args(["train", "--out", "x", "--steps", "5", "--tokens", "1k"])


def test_the_architecture_names_are_the_architecture_table():
    from ihprobe.io.architectures import ARCHITECTURES

    assert config_module.ARCH_NAMES == tuple(ARCHITECTURES)
