"""One CLI grammar, part 2 (issue 47): one name per meaning (``--top`` is a top set's size,
``--draws`` a baseline's random draws, ``--show`` printed rows), one ``--device`` and
``--threads`` default, ``-q`` and ``--text`` everywhere, heads named ``L1H3`` or ``1.3``, and hints
that name only flags the command has; every check runs over every subcommand's parser."""

from __future__ import annotations

import argparse
import re

import pytest

from ihprobe.cli import _common, _text, main
from tests.integration.test_cli_grammar import commands, one_line, options

# ----------------------------------------------------------------------------- one meaning per name

# words a flag's help must use for each meaning (issue 47): --top is the size of a top set and
# nothing else, --draws the random draws of a baseline, --show what a command prints
MEANINGS = {"top": "top set", "draws": "draws", "show": "printed|listed"}


@pytest.mark.parametrize("command", sorted(commands()))
def test_one_name_per_meaning_and_one_default(command):
    parser = commands()[command]
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if nested:  # corpus build: the action's own parser holds the flags
        parser = next(iter(nested[0].choices.values()))
    found = {a.dest: a for a in options(parser)}
    for dest, words in MEANINGS.items():
        if dest in found:
            assert re.search(words, found[dest].help), (command, dest, found[dest].help)
    for action in options(parser):  # no second name for draws or printed rows
        assert not {"--random", "--pairs"} & set(action.option_strings), (command, action)
        if action.dest not in MEANINGS and action.help:
            assert "top set" not in action.help or action.dest == "heads", (command, action)
    if "device" in found:  # one default: train's (TrainConfig.device) is everyone's
        device = found["device"]
        shown = device.default if device.default is not argparse.SUPPRESS else None
        assert shown in (_common.DEFAULT_DEVICE, None), (command, shown)
        said = parser._get_formatter()._expand_help(device)  # train's reads TrainConfig's
        assert f"default: {_common.DEFAULT_DEVICE}" in said or shown, (command, said)
    if "threads" in found:
        assert found["threads"].default == _common.DEFAULT_THREADS, command
    assert "quiet" in found or "progress" in found, f"{command} has no -q"
    quiet = next(a for a in options(parser) if a.dest in ("quiet", "progress"))
    assert quiet.option_strings[:2] == ["-q", "--quiet"], (command, quiet.option_strings)
    if "text" in found:
        assert "file, directory or glob" in found["text"].help, (command, found["text"].help)


def test_the_cli_defaults_match_the_library():
    from ihprobe.core.threads import DEFAULT_THREADS
    from ihprobe.training.config import TrainConfig

    assert _common.DEFAULT_THREADS == DEFAULT_THREADS
    assert _common.DEFAULT_DEVICE == TrainConfig.device


@pytest.mark.parametrize("spelled", ["L1H2", "1.2", "l1h2"])
def test_heads_are_named_as_reports_print_them_or_as_layer_dot_head(spelled):
    from ihprobe.cli.patch import _head_option
    from ihprobe.core.heads import head_name, heads_of

    assert _head_option(spelled, "--sender") == (1, 2)
    assert heads_of(f"L0H3,{spelled}") == [(0, 3), (1, 2)]
    assert head_name((1, 2)) == "L1H2"  # what every report and table prints


def test_a_bad_head_name_is_one_line(capsys):
    for bad in ("L1", "1-2", "H2L1", ""):
        assert main(["patch", "x", "--sender", bad, "--out", "o"]) == 2
        assert "is written L1H3 or 1.3" in one_line(capsys)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["emergence", "r", "--threshold", "-1"], "can only cross a level strictly between"),
        (["emergence", "r", "--threshold", "1.5"], "can only cross a level strictly between"),
        (["emergence", "r", "--metric", "induction_loss", "--threshold", "0"], "pass a level > 0"),
        (["fit-law", "r", "--threshold", "-1"], "can only cross a level strictly between"),
        (["emergence", "r", "--metric", "no_such"], "unknown metric"),
    ],
)
def test_a_threshold_no_run_can_cross_is_refused_before_scanning(argv, said, capsys):
    assert main(argv) == 2
    assert said in one_line(capsys)


def test_sweep_refuses_too_few_checkpoints_for_the_fit_before_training(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--out",
        str(out),
        "--grid",
        "batch_size=4,8",
        "--",
        "--producer",
        "iid",
        "--n-checkpoints",
        "2",
    ]
    assert main(argv) == 2
    line = one_line(capsys)
    assert "too few for the change-point fit" in line and "--n-checkpoints 6" in line
    assert "segments=" not in line  # no setting the command line lacks
    assert not (out / "runs").exists()


def test_hints_name_only_flags_that_exist(capsys):
    """Every ``--flag`` an error or help line of a subcommand suggests is one of its flags."""
    hints = {  # argv -> the subcommand whose flags the line may name
        ("sweep", "--out", "o", "--grid", "batch_size=4", "--", "--n-checkpoints", "2"): "train",
        ("emergence", "r", "--threshold", "-1"): "emergence",
        ("patch", "x", "--sender", "nope", "--out", "o"): "patch",
    }
    for argv, named in hints.items():
        assert main(list(argv)) == 2
        line = one_line(capsys)
        flags = set(re.findall(r"(--[a-z][a-z-]+)", line.split("error:", 1)[1]))
        known = {s for a in commands()[named]._actions for s in a.option_strings}
        assert flags <= known, (argv, flags - known)


def test_text_takes_a_file_a_folder_or_a_glob_everywhere(tmp_path):
    (tmp_path / "a.txt").write_text("one", encoding="utf-8")
    (tmp_path / "b.txt").write_text("two", encoding="utf-8")
    assert _text.read_text_option(str(tmp_path / "a.txt")) == "one"
    assert _text.read_text_option(str(tmp_path)) == ["one", "two"]
    assert _text.read_text_option(str(tmp_path / "*.txt")) == ["one", "two"]
