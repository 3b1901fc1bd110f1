"""The studies' command lines (issue 59, item 4 and 'What to build' 2): a degenerate flag (0 random
draws, 0 steps, a report without the corpus it states) is one line, exit status 2, before
anything is written; the results files stay byte for byte; ``--list`` into a pipe whose reader
left ends quietly; and a contrast that measures nothing new keeps its recorded provenance and
states the draws each row records, not the flag's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lab.studies.__main__ import main
from lab.studies.contrast.measure import draws

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "lab" / "studies"


def results_files() -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(STUDIES.rglob("RESULTS_*")) if p.is_file()}


@pytest.mark.parametrize(
    "argv",
    [
        ["contrast", "--random", "0"],
        ["contrast", "--steps", "0"],
        ["law", "--cell", "sn-B8-C32", "--steps", "0"],
        ["law", "--checkpoints", "-1"],
        ["natural", "--report"],
        ["natural", "--export", "x"],
        ["law", "--no-such-flag"],
        ["no-such-study"],
    ],
)
def test_degenerate_flags_are_one_line_and_write_nothing(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "cache"))  # no corpus built here
    before = results_files()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"python -m lab.studies {argv[0]}: error: "), err
    assert results_files() == before


@pytest.mark.slow  # a child process that imports the studies: seconds of CPU each
@pytest.mark.parametrize("argv", [["--list"], ["law", "--list"]])
def test_list_into_a_closed_pipe_ends_quietly(argv):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.studies", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # the reader leaves before anything is written, as `| head` may
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


def test_the_draws_stated_are_those_each_row_records(tmp_path):
    md = tmp_path / "RESULTS.md"
    md.write_text("Settings: ...; ablation: mean, 20 random draws, index of induction loss.\n")
    older = pd.DataFrame({"arm": ["natural"]})  # rows from before random_draws was recorded
    assert draws(older, md, now=5) == "20"  # the file's record, not this run's flag
    mixed = pd.DataFrame({"random_draws": [20.0, 5.0]})
    assert draws(mixed, md, now=5) == "5 or 20 (per row: the CSV)"
    assert draws(pd.DataFrame({"random_draws": [5.0]}), md, now=None) == "5"
    assert draws(older, tmp_path / "none.md", now=7) == "7"
