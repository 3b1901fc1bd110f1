"""The grid runner (ihprobe/jobs/grid.py) and the shared study command line (lab/studies/run.py):
a cell trains once, is reused afterwards (also when ``ihprobe.train`` made it before the grid
existed), resumes when killed, refuses a folder holding another config, and its study's CSV of
record keeps the rows of run folders that are gone."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pandas as pd
import pytest

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.io.runs import is_finished
from ihprobe.jobs.grid import Grid, other_config, read_result, train_or_reuse, write_record
from ihprobe.training.config import TrainConfig
from lab.studies import run as shared
from lab.studies.study import Study
from tests.helpers import TINY_TRAIN

BASE = TrainConfig(**TINY_TRAIN)
CELLS = {"B4": {"batch_size": 4}, "B8": {"batch_size": 8}}


def test_a_cell_trains_once_then_is_reused(tmp_path):
    grid = Grid(tmp_path, BASE, CELLS, seeds=(0,))
    folder, _, how = grid.run("B8", 0)
    assert (how, folder) == ("trained", tmp_path / "B8" / "seed0")
    assert is_finished(folder)
    assert grid.run("B8", 0)[1:] == (0.0, "reused")


def test_a_run_trained_before_the_grid_existed_is_reused(tmp_path):
    grid = Grid(tmp_path, BASE, CELLS, seeds=(1,))
    ihprobe.train(grid.config("B4", 1))  # as a user trains it, without the grid
    assert grid.run("B4", 1)[2] == "reused"


def test_a_folder_with_another_config_is_refused_and_an_empty_one_restarts(tmp_path):
    grid = Grid(tmp_path, BASE, CELLS, seeds=(0,))
    grid.run("B4", 0)
    other = grid.config("B8", 0)
    moved = TrainConfig(**{**other.to_json(), "out": str(tmp_path / "B4" / "seed0")})
    with pytest.raises(IhprobeError, match="another config"):
        train_or_reuse(moved)
    run, same = tmp_path / "B4" / "seed0", grid.config("B4", 0)
    assert other_config(run, moved) == {"batch_size": (4, 8)}  # what the refusal names
    assert other_config(run, moved, ignore=("batch_size",)) == {}
    assert other_config(run, replace(same, resume=True, device="cuda")) == {}  # a resume's own
    (tmp_path / "B8" / "seed0").mkdir(parents=True)  # killed before its first training state
    assert grid.run("B8", 0)[2] == "trained"


def test_the_record_and_its_report_are_written_whole(tmp_path):
    csv, md = tmp_path / "r.csv", tmp_path / "R.md"
    write_record(csv, pd.DataFrame({"cell": ["a"], "seed": [0]}), md, "# R\n")
    assert csv.read_text() == "cell,seed\na,0\n" and md.read_text() == "# R\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.md", "r.csv"]  # no temporaries


def test_an_unknown_cell_is_one_line():
    with pytest.raises(IhprobeError, match="unknown cell 'B2'; choose one of B4, B8"):
        Grid("runs/x", BASE, CELLS).config("B2", 0)


def test_the_shared_command_line_records_measures_and_keeps_gone_rows(tmp_path, capsys):
    measured = []

    def measure(folder, cell, seed):
        measured.append((cell, seed))
        return {
            "final_loss": float(pd.read_json(folder / "metrics.jsonl", lines=True).loss.iloc[-1])
        }

    def report(frame, provenance):
        return "\n".join([*provenance, frame.to_csv(index=False)])

    grid = Grid(tmp_path / "runs", BASE, CELLS, seeds=(0,))
    study = Study("demo", "?", tmp_path, ("R.md", "R.csv"), grid, measure, report)
    shared.main(study, ["--cell", "B4", "--seed", "0"])
    shared.main(study, ["--cell", "B4", "--seed", "0"])  # reused, measured once
    assert measured == [("B4", 0)]
    frame = pd.read_csv(tmp_path / "R.csv")
    assert frame.status.tolist() == ["done", "pending"] and frame.final_loss.notna().sum() == 1
    assert "-m lab.studies demo --cell CELL --seed SEED" in (tmp_path / "R.md").read_text()
    assert read_result(grid.folder("B4", 0))["final_loss"] == frame.final_loss[0]
    shutil.rmtree(tmp_path / "runs")  # the folders go; the CSV of record keeps the row
    (tmp_path / "R.md").write_text("Runs: `then`\nLast command: `then`\nHardware: then\n")
    shared.main(study, ["--report"])
    again = pd.read_csv(tmp_path / "R.csv")
    assert again.status.tolist() == ["done", "pending"]
    assert (tmp_path / "R.md").read_text().startswith("Runs: `then`\nLast command: `then`\n")
    shared.main(study, ["--list"])
    assert capsys.readouterr().out.splitlines() == ["B4 batch_size=4", "B8 batch_size=8"]


def test_a_cell_trains_at_one_torch_thread_and_restores_the_callers(tmp_path, monkeypatch):
    import torch

    from ihprobe.jobs import grid as grid_module

    seen = []
    monkeypatch.setattr(grid_module, "train", lambda config: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train_or_reuse(replace(BASE, out=str(tmp_path / "one")))
        train_or_reuse(replace(BASE, out=str(tmp_path / "two")), threads=2)
        assert seen == [1, 2] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
