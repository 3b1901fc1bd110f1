"""The law grid's record of finished runs: a run whose folder is gone (``runs/`` is not
committed) is read from the results CSVs, never retrained, and a cell's reruns are kept in
their own CSV until every seed has one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ihprobe.jobs import grid as common
from lab.studies.law import cells as law_cells
from lab.studies.law import control
from lab.studies.law import run as law
from lab.tests.law_helpers import fit_text, law_frame


@pytest.fixture(autouse=True)
def _own_reruns_csv(tmp_path, monkeypatch):
    """Never the committed reruns CSV: each test starts without recorded reruns."""
    monkeypatch.setattr(law, "RERUNS_CSV", tmp_path / "no-reruns.csv")


def test_a_cell_whose_first_runs_live_only_in_the_csv_is_extended_seed_by_seed(
    tmp_path, monkeypatch
):
    """The folders of earlier sessions are gone: a seed without a transition (or the control's)
    still counts, and the cell shows its reruns only once every CSV seed has one."""
    monkeypatch.setattr(law, "OUT_CSV", tmp_path / "law.csv")
    monkeypatch.setattr(law, "DEFAULT_OUT", tmp_path / "runs")
    args = SimpleNamespace(out=str(law.DEFAULT_OUT), from_csv=False)
    cell, budget = "nr-B8-C128", 16400
    frame = law_frame(0.9, 0.1)
    first = (frame.cell == cell) & (frame.seed < 2)  # seed 0 placed, seed 1 none by the budget
    frame.loc[first, ["status", "steps"]] = ["done", budget]
    frame.loc[first & (frame.seed == 1), ["transition", "updates"]] = [False, np.nan]
    frame.loc[frame.cell == control.CELL, ["status", "transition"]] = ["done", False]
    frame.to_csv(law.OUT_CSV, index=False)
    assert law.censored_cells(args) == [cell]  # the control's seeds are meant to have none
    for seed, updates in ((0, 7000.0), (1, 20000.0)):
        assert not law.extended(args.out, cell)  # seed 0's rerun alone does not replace
        rerun = law.run_dir(args.out, cell, seed, law_cells.EXTEND)
        rerun.mkdir(parents=True)
        common.write_result(
            rerun,
            {
                "transition": True,
                "censored": False,
                "updates": updates,
                "steps": budget * law_cells.EXTEND,
                "budget_factor": law_cells.EXTEND,
            },
        )
    rows = law.collect(args).set_index(["cell", "seed"])
    assert law.extended(args.out, cell) and rows.loc[(cell, 1), "updates"] == 20000.0
    assert rows.loc[(cell, 1), "first_run"] == f"none by {budget:,}"
    assert rows.loc[(cell, 0), "first_run"] == f"{frame[first].updates.iloc[0]:,.0f}"


def test_the_law_tables_rebuild_from_the_csv_alone(tmp_path, monkeypatch):
    frame = law_frame(0.9, 0.1, seeds=(0, 1, 2))
    monkeypatch.setattr(law, "OUT_CSV", tmp_path / "law.csv")
    monkeypatch.setattr(law, "DEFAULT_OUT", tmp_path / "absent")  # no run folder is read
    frame.to_csv(law.OUT_CSV, index=False)
    again = law.collect(SimpleNamespace(out=str(law.DEFAULT_OUT), from_csv=True))
    done = again[again.status == "done"].set_index(["cell", "seed"]).sort_index()
    expected = frame[frame.status == "done"].set_index(["cell", "seed"]).sort_index()
    assert np.allclose(done.updates, expected.updates) and len(again) == len(frame)
    assert "b **disagrees**" in fit_text(again)


def test_a_new_seed_adds_to_the_csv_rows_of_run_folders_that_are_gone(tmp_path, monkeypatch):
    frame = law_frame(0.9, 0.1, seeds=(0, 1, 2))
    monkeypatch.setattr(law, "OUT_CSV", tmp_path / "law.csv")
    monkeypatch.setattr(law, "DEFAULT_OUT", tmp_path / "runs")
    frame.to_csv(law.OUT_CSV, index=False)
    cell = "sn-B8-C64"
    run = law.run_dir(str(law.DEFAULT_OUT), cell, 3)
    run.mkdir(parents=True)
    common.write_result(
        run,
        {
            "transition": True,
            "censored": False,
            "steps": 15300,
            "updates": 4321.0,
            "budget_factor": 1,
        },
    )
    rows = law.collect(SimpleNamespace(out=str(law.DEFAULT_OUT))).set_index(["cell", "seed"])
    assert rows.loc[(cell, 3)].updates == 4321.0 and rows.loc[(cell, 3)].status == "done"
    saved = frame.set_index(["cell", "seed"]).loc[(cell, 0)].updates
    assert rows.loc[(cell, 0)].updates == saved and rows.loc[(cell, 4)].status == "pending"
    # another --out holds other runs: the committed rows are not mixed in
    other = law.collect(SimpleNamespace(out=str(tmp_path / "elsewhere")))
    assert (other.status == "pending").all()


@pytest.mark.slow
def test_finished_runs_whose_folders_are_gone_are_read_not_retrained(tmp_path, monkeypatch):
    monkeypatch.setattr(law, "OUT_CSV", tmp_path / "law.csv")
    monkeypatch.setattr(law, "RERUNS_CSV", tmp_path / "reruns.csv")
    monkeypatch.setattr(law, "DEFAULT_OUT", tmp_path / "runs")
    monkeypatch.setattr(law, "train_or_reuse", lambda config: pytest.fail(f"trains {config.out}"))
    frame = law_frame(0.9, 0.1)
    frame.to_csv(law.OUT_CSV, index=False)
    cell = "nr-B8-C128"  # its first runs shown; seed 0's rerun kept only in the reruns CSV
    pd.DataFrame(
        [
            {
                "cell": cell,
                "seed": 0,
                "status": "done",
                "transition": True,
                "updates": 20000.0,
                "budget_factor": law_cells.EXTEND,
            }
        ]
    ).to_csv(law.RERUNS_CSV, index=False)
    args = SimpleNamespace(
        out=str(law.DEFAULT_OUT), steps=None, layers=2, d_model=64, checkpoints=40, state_every=100
    )
    first = law.run_cell("sn-B8-C32", law_cells.cells()["sn-B8-C32"], 2, args)
    saved = frame.set_index(["cell", "seed"]).loc[("sn-B8-C32", 2)].updates
    assert first["updates"] == saved
    rerun = law.run_cell(cell, law_cells.cells()[cell], 0, args, factor=law_cells.EXTEND)
    assert (
        rerun["updates"] == 20000.0 and law.result_of(args.out, cell, 1, law_cells.EXTEND) is None
    )
    with pytest.raises(pytest.fail.Exception, match="trains"):  # not recorded: it would train
        law.run_cell(cell, law_cells.cells()[cell], 1, args, factor=law_cells.EXTEND)
    monkeypatch.setattr(law, "OUT_MD", tmp_path / "law.md")
    law.report(SimpleNamespace(**vars(args), from_csv=False))  # rewrites the reruns CSV too
    kept = pd.read_csv(law.RERUNS_CSV)
    assert kept[["cell", "seed", "updates"]].values.tolist() == [[cell, 0, 20000.0]]
