"""Command-line arguments and outputs: bad input is one line and exit 2, before any work; help
text tells the defaults the parsers use. The run directory itself (locks, checksums, resumes,
the scan cache) is tested in ``test_cli_args_runs.py``."""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import fields

import pytest

from ihprobe.cli import _common as types
from ihprobe.cli import build_parser, main
from ihprobe.cli._suite import steps as suite_steps
from ihprobe.cli.train import checkpoints as checkpoint_list
from ihprobe.cli.train import clip, count
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_write
from ihprobe.jobs.demo import DemoConfig
from ihprobe.training.config import TrainConfig

BAD = ["nan", "inf", "-inf", "abc", ""]
# every numeric argument type -> values it must refuse (on top of BAD)
REFUSES = {
    types.positive_int: ["0", "-5", "2.5"],
    types.nonnegative_int: ["-5", "2.5"],
    types.seed_int: ["-5", "2.5"],
    types.positive_float: ["0", "-5"],
    types.nonnegative_float: ["-5"],
    types.finite_float: [],
    types.fraction: ["0", "-5", "1.5"],
    types.fraction_or_count: ["0", "-5", "1.5", "2.5"],
    types.probability: ["-5", "1.5"],
    types.warmup_fraction: ["-5", "1"],
    count: ["0", "-5"],
    clip: ["-5"],
    suite_steps: ["-5", "2.5", "1,-5", "1,,2"],
}
NOT_NUMERIC = {types.key_value, types.device, checkpoint_list, None}


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def flags() -> list[tuple[str, str, object]]:
    """(command, flag, type) of every option that takes a value."""
    found = []
    for name, parser in commands().items():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                found.append((name, action.option_strings[-1], action.type))
    return found


def test_every_flag_that_takes_a_number_has_a_checked_type():
    loose = [(c, f) for c, f, t in flags() if t in (int, float)]
    assert not loose, f"flags with a raw int/float type (no range check): {loose}"
    unknown = [(c, f, t) for c, f, t in flags() if t not in REFUSES and t not in NOT_NUMERIC]
    assert not unknown


NUMERIC = [(c, f, t) for c, f, t in flags() if t in REFUSES]


@pytest.mark.parametrize(
    ("command", "flag", "kind"), NUMERIC, ids=[f"{c} {f}" for c, f, _ in NUMERIC]
)
def test_every_numeric_flag_refuses_bad_values_with_one_line_and_exit_2(
    command, flag, kind, capsys
):
    for value in BAD + REFUSES[kind]:
        assert main([command, f"{flag}={value}"]) == 2, (flag, value)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert flag in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        (types.positive_int, "3", 3),
        (types.nonnegative_int, "0", 0),
        (types.fraction, "1", 1.0),
        (types.probability, "0", 0.0),
        (types.finite_float, "-0.5", -0.5),
        (count, "2.5k", 2500),
        (clip, "none", None),
    ],
)
def test_good_values_pass_the_same_types(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize("value", ["bogus", "cuda:x", "gpu", "cpu:"])
def test_a_bad_device_is_one_line(value, capsys):
    assert main(["train", "--out", "x", "--device", value]) == 2
    assert "--device" in capsys.readouterr().err


def test_one_key_value_flag_for_producer_options():
    for name in ("train", "data-stats"):
        option_flags = {f for c, f, _ in flags() if c == name}
        assert "--option" in option_flags
        assert not option_flags & {"-P", "--producer-option"}
    assert types.key_value("period=[8, 32]") == ("period", [8, 32])
    with pytest.raises(argparse.ArgumentTypeError):
        types.key_value("oops")
    with pytest.raises(argparse.ArgumentTypeError):
        types.key_value("p=NaN")


def test_a_shortcut_is_its_option_by_another_name(capsys, tmp_path):
    """``--repetition 0.5`` asks data-stats for what ``--option repetition=0.5`` asks; both
    for one key is one line and exit 2 on both commands that take producer options."""
    base = ["data-stats", "--producer", "semi-natural", "--batches", "2", "--json"]
    assert main([*base, "--repetition", "0.5", "--vocab-size", "300"]) == 0
    short = capsys.readouterr().out
    assert main([*base, "--option", "repetition=0.5", "--option", "vocab_size=300"]) == 0
    assert capsys.readouterr().out == short
    for argv in (base, ["train", "--out", str(tmp_path / "run"), "--steps", "2"]):
        assert main([*argv, "--repetition", "0.5", "--option", "repetition=0.4"]) == 2
        err = capsys.readouterr().err.strip()
        assert "--repetition and --option repetition=... both given" in err and "\n" not in err
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- help


def library_default(command: str, dest: str):
    """The default the library applies when a flag is not given (train and demo)."""
    config = {"train": TrainConfig, "demo": DemoConfig}.get(command)
    if config is None:
        return None
    if dest == "steps" and command == "train":
        from ihprobe.training.config import DEFAULT_STEPS

        return DEFAULT_STEPS
    found = {f.name: f.default for f in fields(config)}
    return found.get(dest)


def same(documented: str, value) -> bool:
    if documented == "none":
        return value in (None, [], (), "none")
    try:
        return math.isclose(float(documented), float(value))
    except (TypeError, ValueError):
        return documented.strip("'\"") == str(value)


@pytest.mark.parametrize("command", sorted(commands()))
def test_help_runs_and_every_documented_default_is_the_real_one(command, capsys):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert command in text
    parser = commands()[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.help or action.help == argparse.SUPPRESS:
            continue
        shown = formatter._expand_help(action) if action.option_strings else action.help
        for documented in re.findall(r"\(default:? ([^)\s,;]+)\)", shown):
            real = action.default
            if real in (None, argparse.SUPPRESS):
                real = library_default(command, action.dest)
            if real is None:
                continue  # a computed default, described in words
            assert same(documented, real), (command, action.dest, documented, real)


def test_the_stale_help_is_gone(capsys):
    for command in ("demo", "train", "scan", "emergence"):
        assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "1200" not in text and "repeats" in text
    assert "(default PS)" not in text


# ----------------------------------------------------------------------------- outputs and text


def test_an_output_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    for argv in (
        ["scan", "org/missing-ckpt", "--out", str(target)],
        ["ablate", "org/missing-ckpt", "--out", str(target)],
        ["emergence", "org/missing-run", "--html", str(tmp_path)],
        ["demo", "--out", str(target)],
        ["train", "--out", str(target), "--producer", "iid", "--steps", "1"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(tmp_path) in err, err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_is_refused_before_any_work(tmp_path, capsys):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    assert main(["scan", "no/such/ckpt", "--out", str(locked / "out")]) == 2
    assert "not writable" in capsys.readouterr().err


def test_binary_text_is_one_line(tmp_path, capsys):
    binary = tmp_path / "bin.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    assert main(["scan", "x", "--text", str(binary), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not UTF-8" in err


def test_sweep_refuses_an_axis_that_moves_runs_outside_it(tmp_path, capsys):
    for grid in ("out=a,b", "producer=../x,y", "resume=true"):
        assert main(["sweep", "--out", str(tmp_path), "--grid", grid, "--no-train"]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_demo_settings_are_checked_before_training(tmp_path):
    from ihprobe.jobs.demo import run_demo

    with pytest.raises(IhprobeError, match="random=0"):
        run_demo(DemoConfig(out=str(tmp_path / "demo"), random=0))
    with pytest.raises(IhprobeError, match="heads=3"):
        run_demo(DemoConfig(out=str(tmp_path / "demo"), heads=3))
    assert not (tmp_path / "demo" / "main").exists()


def test_disk_full_is_one_line_and_leaves_no_temporary_file(tmp_path):
    def fill_disk(path):
        path.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(IhprobeError, match="disk full"):
        atomic_write(tmp_path / "out.csv", fill_disk)
    assert list(tmp_path.iterdir()) == []
