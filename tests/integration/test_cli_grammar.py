"""One CLI grammar (issue 26) and checked option combinations (issue 28): the same flag for the
same thing on every subcommand, help and a default shown for every option, no abbreviations,
``--version``, stage lines when stderr is not a terminal, one CSV shape, and every bad value or
combination one line with exit status 2 before any work starts."""

from __future__ import annotations

import argparse
import logging
import os
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from ihprobe import __version__
from ihprobe.cli import _stages, build_parser, main
from ihprobe.core.stages import STAGE
from ihprobe.io.provenance import CSV_COLUMNS
from tests.helpers import fake_run

# the one spelling of each shared thing (argparse dest -> option strings)
CANONICAL = {
    "n": ["-n", "--n"],
    "batch": ["--batch"],
    "seed": ["--seed"],
    "device": ["--device"],
    "dtype": ["--dtype"],
    "quiet": ["-q", "--quiet"],
    "text": ["--text"],
    "revision": ["--revision"],
    "out": ["--out"],
    "force": ["--force"],
    "json": ["--json"],
    "all_checkpoints": ["--all-checkpoints"],
    "threads": ["--threads"],
    "draws": ["--draws"],
    "show": ["--show"],
    "top": ["--top"],
}  # tests/test_cli_names.py: one meaning per name, one default, head names, hints
# commands that load models: each has --device (and, reading one skeleton, --dtype)
LOADS_MODELS = {"scan", "ablate", "composition", "patch", "info", "emergence", "fit-law"}
WITH_DTYPE = {"scan", "ablate", "composition", "patch", "info"}
PROBE_ROWS = {"scan", "ablate", "patch", "emergence", "fit-law", "sweep"}  # -n/--n, --batch
SOURCES = {"scan", "ablate", "composition", "patch", "info"}  # SOURCE: checkpoint/run/hub id
BIG = str(2**63)  # one past int64


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def options(parser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest not in ("help",)]


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_option_has_help_and_shows_its_default(command):
    parser = commands()[command]
    formatter = parser._get_formatter()
    for action in options(parser):
        shown = formatter._expand_help(action) if action.help else ""
        assert shown.strip(), (command, action.option_strings, "no help")
        says_default = "default" in shown.lower()
        assert says_default or action.nargs == 0 or action.required, (command, shown)
        assert not re.search(r"\(default: (True|False)\)", shown), (command, shown)  # a flag


@pytest.mark.parametrize("command", sorted(commands()))
def test_the_same_thing_has_the_same_flag_on_every_subcommand(command):
    parser = commands()[command]
    found = {a.dest: a.option_strings for a in options(parser)}
    for dest, spelled in CANONICAL.items():
        if dest in found:
            assert found[dest] == spelled, (command, dest, found[dest])
    if command in LOADS_MODELS:
        assert "device" in found, command
    if command in WITH_DTYPE:
        assert "dtype" in found, command
    if command in PROBE_ROWS:
        assert found.get("n") == ["-n", "--n"] and "batch" in found, command
    if command in SOURCES:
        source = next(a for a in parser._actions if a.dest == "sources")
        assert "run directory" in source.help, command
    assert not parser.allow_abbrev, command


def test_flags_are_never_abbreviated(tmp_path, capsys):
    args = build_parser().parse_args(["emergence", "r", "--n", "4"])
    assert args.n == 4 and args.cache is True  # --n is n, not --no-cache
    assert main(["emergence", "r", "--no-ca"]) == 2
    assert "unrecognized arguments: --no-ca" in one_line(capsys)


def test_a_flag_the_subcommand_does_not_take_points_to_its_own_help(capsys):
    assert main(["emergence", "r", "--out", "o"]) == 2
    line = one_line(capsys)
    assert line.startswith("ihprobe emergence: error: unrecognized arguments: --out o")
    assert line.endswith("(see ihprobe emergence --help)")


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"ihprobe {__version__}"


@pytest.mark.parametrize(
    "command", sorted(c for c in commands() if "seed" in {a.dest for a in options(commands()[c])})
)
def test_a_seed_beyond_int64_or_negative_is_one_line(command, capsys):
    for value in (BIG, "-1", "9" * 400):
        assert main([command, f"--seed={value}", "--no-such-flag"]) == 2
        assert "--seed" in one_line(capsys)
    seed = next(a for a in options(commands()[command]) if a.dest == "seed")
    assert seed.type(str(2**63 - 1)) == 2**63 - 1 and seed.type("0") == 0


def test_every_integer_flag_stops_at_int64(capsys):
    for command, parser in commands().items():
        for action in options(parser):
            if action.type is not None and _takes_integers(action.type):
                assert main([command, f"{action.option_strings[-1]}={BIG}", "--x"]) == 2
                assert "beyond int64" in one_line(capsys), (command, action.option_strings)


def _takes_integers(kind) -> bool:
    try:
        return type(kind("7")) is int
    except Exception:  # noqa: BLE001 - a non-numeric type refuses "7" in its own way
        return False


@pytest.mark.parametrize("command", ["scan", "ablate"])
def test_text_opens_regular_files_only(command, tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, said in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (tmp_path, "names no text files"),
    ):  # a folder holding only the FIFO
        started = time.monotonic()
        assert main([command, "x", "--text", str(path), "--out", str(tmp_path / "o")]) == 2
        assert said in one_line(capsys)
        assert time.monotonic() - started < 30  # refused, not read
    assert main([command, "x", "--text", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "cannot read --text" in one_line(capsys)


def test_an_empty_source_is_refused_not_the_current_directory(capsys):
    for argv in (["info", ""], ["scan", " "], ["composition", ""]):
        assert main(argv) == 2
        assert "empty SOURCE" in one_line(capsys)


@pytest.mark.parametrize(
    "extra",
    [
        ["--b", "1000"],
        ["--T", "1e308", "--b", "-1"],
        ["--b", "-1000"],
        ["-B", BIG],
        ["-B", "9" * 400],
        ["-B", str(2**63 - 1), "-C", str(2**63 - 1)],
    ],
)
def test_predict_refuses_combinations_without_a_finite_answer(extra, capsys):
    argv = ["predict", "-B", "16", "-C", "64", *extra]
    assert main(argv) == 2
    err = one_line(capsys)
    assert "inf" not in err.split("error:")[-1]
    assert main(["predict", "-B", "16", "-C", "64"]) == 0
    assert "updates" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("grid", "said"),
    [
        ("../../x=1", "not a TrainConfig field"),
        ("batch_size=0", "grid point batch_size=0: argument -B/--batch-size"),
        ("lr=-1", "grid point lr=-1: argument --lr"),
        ("bogus=1", "has no option bogus"),
        ("batch_size=4,true", "grid point batch_size=True"),
        ("heads=3", "does not divide d_model"),
    ],
)
def test_sweep_checks_every_grid_point_before_training(grid, said, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--out", str(out), "--grid", grid, "--", "--producer", "iid"]
    assert main(argv) == 2
    assert said in one_line(capsys)
    assert not (out / "runs").exists() and not (tmp_path / "x=1").exists()


def test_data_stats_and_train_refuse_impossible_sizes(tmp_path, capsys):
    assert main(["data-stats", "--producer", "iid", "--batch-size", "9000000000000000000"]) == 2
    assert "tokens, more than" in one_line(capsys)
    assert main(["data-stats", "--producer", "iid", "--batches", "2000000000"]) == 2
    one_line(capsys)
    train = ["train", "--out", str(tmp_path / "r"), "--producer", "iid", "-B", "4", "-C", "8"]
    assert main([*train, "--tokens", "31"]) == 2
    assert "less than one update" in one_line(capsys)
    assert main([*train, "--steps", str(2**62)]) == 2
    assert "overflow the int64" in one_line(capsys)
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- stage lines


def test_stage_lines_every_interval_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(_stages, "EVERY_S", 0.05)
    stages = logging.getLogger("ihprobe.test")

    def slow_predict(args):
        stages.info("stage one", extra=STAGE)
        time.sleep(0.3)
        stages.info("a note, not a stage")
        time.sleep(0.3)
        stages.info("stage two", extra=STAGE)
        time.sleep(0.3)
        return 0

    args = build_parser().parse_args(["predict", "-B", "1", "-C", "2"])
    args.func = slow_predict
    monkeypatch.setattr("ihprobe.cli.build_parser", lambda: _Fixed(args))
    assert main([]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 9 and all(line.startswith("ihprobe predict: ") for line in lines)
    assert any("stage one" in line for line in lines) and "stage two" in lines[-1]
    assert not any("a note" in line for line in lines)  # a stage outranks other records
    assert logging.getLogger("ihprobe").level == logging.NOTSET  # restored


def test_no_stage_lines_when_quiet(monkeypatch, capsys):
    monkeypatch.setattr(_stages, "EVERY_S", 0.01)
    with _stages.stage_lines("scan", enabled=False):
        time.sleep(0.1)
    assert capsys.readouterr().err == ""


class _Fixed:
    """A parser stand-in that returns prepared arguments."""

    def __init__(self, args):
        self.args = args

    def parse_known_args(self, argv):
        return self.args, []


# ----------------------------------------------------------------------------- on a run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return fake_run(tmp_path_factory.mktemp("grammar") / "run", [0, 100, 200])


@pytest.mark.slow
def test_every_csv_has_one_shape_and_run_directories_work_everywhere(run_dir, tmp_path, capsys):
    rows = ["-n", "4", "--batch", "4", "-q"]
    commands_run = {
        "scores.csv": ["scan", str(run_dir), "--metrics", "prefix_matching", *rows],
        "ablation.csv": ["ablate", str(run_dir), "--draws", "2", "--metrics", "ar_accuracy", *rows],
        "composition.csv": ["composition", str(run_dir), "--draws", "2", "-q"],
        "patch.csv": ["patch", str(run_dir), "--sender", "0.1", "--receiver", "1.2", *rows],
    }
    tables = {}
    for name, argv in commands_run.items():
        out = tmp_path / name
        assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
        tables[name] = pd.read_csv(out / name)
        if name == "patch.csv":
            tables["path.csv"] = pd.read_csv(out / "path.csv")
    for name, table in tables.items():
        assert list(table.columns) == list(CSV_COLUMNS), name
        assert table["model"].eq("fake").all() and table["metric"].notna().all(), name
    assert set(tables["scores.csv"]["step"]) == {0, 100, 200}  # scan sweeps the run
    assert set(tables["ablation.csv"]["step"]) == {200}  # ablate takes its last checkpoint
    assert set(tables["composition.csv"]["tokens"]) == {200 * 1024}
    ablation = tables["ablation.csv"]
    assert not ablation["metric"].str.contains(r"\.").any()
    assert {"clean", "p_value"} <= set(ablation["statistic"].dropna())
    composition = tables["composition.csv"]
    assert (composition["sender_layer"] < composition["layer"]).all()
    assert set(tables["path.csv"]["metric"]) == {"path_patch"}
    assert set(tables["path.csv"]["input"]) == {"q", "k", "v"}


@pytest.mark.slow
def test_ablate_all_checkpoints_and_the_contradiction_with_over_training(run_dir, tmp_path, capsys):
    argv = [
        "ablate",
        str(run_dir),
        "--draws",
        "2",
        "--metrics",
        "ar_accuracy",
        "-n",
        "4",
        "--batch",
        "4",
        "-q",
        "--out",
        str(tmp_path / "a"),
    ]
    assert main([*argv, "--all-checkpoints"]) == 0
    assert set(pd.read_csv(tmp_path / "a" / "ablation.csv")["step"]) == {0, 100, 200}
    capsys.readouterr()
    assert main([*argv, "--force", "--all-checkpoints", "--over-training"]) == 2
    assert "--over-training already takes every checkpoint" in one_line(capsys)


def test_train_help_shows_the_defaults_trainconfig_holds(monkeypatch):
    from dataclasses import fields

    from ihprobe.cli import train as train_cli
    from ihprobe.training.config import TrainConfig

    parser = commands()["train"]
    formatter = parser._get_formatter()
    marked = [a for a in options(parser) if (a.help or "").endswith(train_cli.MARK)]
    assert len(marked) > 20  # the options whose default is a TrainConfig value
    names = {f.name for f in fields(TrainConfig)}
    for action in marked:
        assert action.dest in names, action.dest
    lr = next(a for a in marked if a.dest == "lr")
    assert formatter._expand_help(lr).endswith("(default: 3e-3)")
    monkeypatch.setattr(train_cli, "config_default", lambda name: f"<{name}>")
    assert formatter._expand_help(lr).endswith("(default: <lr>)")  # read, not typed
