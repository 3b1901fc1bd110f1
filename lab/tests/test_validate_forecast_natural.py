"""validate_forecast.py --natural: finished pilot runs only, each forecast judged at its
fraction of the run, and coverage that follows where the measured point lies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.prior import law_prior
from lab.studies.forecast import cells, claims, measure

STEPS = 20000


def pilot_run(root: Path, seed: int, *, finished: bool = True, probes: bool = True) -> Path:
    """A pilot folder as the trainer leaves it: run.json, the last checkpoint's config (when
    ``finished``) and live probes whose max PS ramps up from step 7,000 to 12,000."""
    run = root / "d128-test" / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps({"config": {"batch_size": 4, "context": 256}, "steps": STEPS})
    )
    if finished:
        last = run / "checkpoints" / f"step-{STEPS:06d}"
        last.mkdir(parents=True)
        (last / "config.json").write_text("{}")
    if probes:
        steps = np.linspace(0, STEPS, 25).astype(int)
        ps = 0.01 + 0.3 * np.clip((steps - 7000) / 5000, 0, 1)
        lines = [
            json.dumps({"step": int(s), "max_prefix_matching": float(p)})
            for s, p in zip(steps, ps, strict=True)
        ]
        (run / "probes.jsonl").write_text("\n".join(lines))
    return run


def point(updates: float) -> EmergencePoint:
    return EmergencePoint(
        "prefix_matching",
        "max",
        True,
        updates=updates,
        updates_low=updates * 0.9,
        updates_high=updates * 1.1,
    )


def test_only_finished_pilot_runs_with_probes_are_judged(tmp_path):
    done = pilot_run(tmp_path, 0)
    pilot_run(tmp_path, 1, finished=False)
    pilot_run(tmp_path, 2, probes=False)
    assert measure.natural_runs(tmp_path) == [("d128-test", 0, done)]


@pytest.mark.parametrize(("measured", "covered"), [(7000, True), (1e7, False)])
def test_each_forecast_is_judged_at_its_fraction_against_the_measured_point(
    tmp_path, measured, covered
):
    run = pilot_run(tmp_path, 0)
    prior = {"[A] law": law_prior(4, 256)}
    records, shape = measure.probe_records(run), {"pilot": "p", "seed": 0}
    rows = pd.DataFrame(measure.judged(records, prior, point(measured), STEPS, shape))
    assert rows.fraction.tolist() == list(cells.AT)
    assert all(r.at_step <= r.fraction * STEPS < r.at_step + STEPS / 24 for r in rows.itertuples())
    assert rows.prior_covered.all() == covered  # the prior (law alone) is the same every time
    assert (rows.prior_width.round(6) == rows.prior_width.iloc[0].round(6)).all()
    # by half the run the ramp has started: the forecast narrows and still covers the onset
    half = rows[rows.fraction == 0.5].iloc[0]
    assert half.width < half.prior_width / 2
    assert bool(half.covered) == covered
    lines = "\n".join(claims.natural_lines(rows))
    assert "`p` seed 0" in lines and claims.NATURAL_HEADING in lines


def test_no_pilot_run_yet_says_so():
    assert "No finished natural-text pilot run" in "\n".join(claims.natural_lines(pd.DataFrame()))


def test_the_grid_cell_is_read_beside_the_pilots_and_rows_of_gone_folders_are_kept(
    tmp_path, monkeypatch
):
    """--natural reads the pilots and the grid's cell of the same recipe; a run already in
    the CSV whose folder is gone keeps its rows, a run read again replaces its own."""
    from lab.studies.forecast import run

    pilots, grid = tmp_path / "pilots", tmp_path / "grid"
    pilot_run(pilots, 0)
    pilot_run(grid, 1).parent.rename(grid / "B4-C256")
    pilot_run(grid, 2).parent.rename(grid / "B8-C512")  # another cell of the grid: not read
    csv, md = tmp_path / "natural.csv", tmp_path / "forecast.md"
    monkeypatch.setattr(measure, "run_emergence", lambda folder: point(9000))
    pilot_run(tmp_path / "before", 0)
    recorded = pd.DataFrame(measure.natural_rows(tmp_path / "before"))
    gone = recorded.assign(seed=3)  # a run whose folder is gone since
    old = recorded.assign(measured=-1)  # seed 0 is read again: its old rows go
    pd.concat([gone, old]).to_csv(csv, index=False)
    monkeypatch.setattr(run, "NATURAL_CSV", csv)
    monkeypatch.setattr(run, "OUT_MD", md)
    run.natural(pilots, (grid, "B4-C256"))
    table = pd.read_csv(csv)
    runs = set(zip(table.pilot, table.seed, strict=True))
    assert runs == {("d128-test", 3), ("d128-test", 0), ("B4-C256", 1)}
    assert (table[table.seed == 0].measured == 9000).all()  # read again, not the old row
    assert (table.prior == measure.NATURAL_PRIOR).all()  # one prior row over every run
    kept = table[table.seed == 3].drop(columns=["prior", "seed"]).reset_index(drop=True)
    assert kept.equals(gone.drop(columns=["prior", "seed"]).reset_index(drop=True))
    assert claims.NATURAL_HEADING in md.read_text()
