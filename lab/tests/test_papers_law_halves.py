"""The law grid's refits without training (lab/studies/law/halves.py): the interleaved
halves recover the point of a clean trajectory, the F interval covers at its level, every
verdict flips with the data, and a run trained here goes through the whole pass (resumably)."""

from __future__ import annotations

import doctest
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ihprobe.dynamics.changepoint import emergence, run_emergence
from ihprobe.training.schedule import checkpoint_steps
from lab.studies.law import forecast as lf
from lab.studies.law import halves as h
from lab.studies.law import probe_length as pl


def sigmoid_table(midpoint: float, *, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Max PS over 40 log-spaced checkpoints (B 16, C 128): flat, a sigmoid rise in log tokens
    centred at ``midpoint`` updates, flat again; one head."""
    steps = checkpoint_steps("log", total=8800, tokens_per_update=2048, n=40)
    x = np.log10(np.maximum(steps, 1) / midpoint)
    rng = np.random.default_rng(seed)
    ps = 0.02 + 0.8 / (1 + np.exp(-x / 0.08)) + noise * rng.standard_normal(len(steps))
    tokens = np.asarray(steps) * 2048
    return pd.DataFrame(
        {
            "model": "m",
            "step": steps,
            "tokens": tokens,
            "layer": 0,
            "head": 0,
            "metric": "prefix_matching",
            "value": ps,
        }
    )


@pytest.mark.parametrize("module", [h, lf, pl])
def test_the_modules_examples_hold(module):
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0


@pytest.mark.parametrize("midpoint", [700, 2400, 5000])
def test_the_halves_recover_the_point_of_a_clean_sigmoid(midpoint):
    table = sigmoid_table(midpoint)
    even, odd = h.interleaved(table)
    assert set(even.step) & set(odd.step) == {0}
    assert set(even.step) | set(odd.step) == set(table.step)
    full = emergence(table, batch_size=16, context=128)
    points = [emergence(half, batch_size=16, context=128) for half in (even, odd)]
    assert full.transition and all(p.transition for p in points)
    interval = 2 * np.log10(8800) / 40  # one checkpoint interval of a half, in log10 updates
    for p in points:
        assert abs(np.log10(p.updates / full.updates)) < interval, (p, full)
    # and the point lies where the rise starts, below the sigmoid's midpoint
    assert full.updates < midpoint


def test_the_halves_of_a_run_without_a_rise_have_no_transition():
    flat = sigmoid_table(1e9, noise=0.002)
    assert not any(emergence(half).transition for half in h.interleaved(flat))


def test_the_f_interval_covers_the_true_ratio_at_its_level():
    rng = np.random.default_rng(1)
    sd_half, sd_seed, runs, df_between = 0.05, 0.12, 8, 12
    truth = sd_half / sd_seed
    hits = 0
    for _ in range(1000):
        d = rng.normal(0, sd_half * np.sqrt(2), runs)  # two halves' independent errors
        between = np.var(rng.normal(0, sd_seed, df_between + 1), ddof=1)
        r = h.noise_ratio(d, between, df_between)
        hits += r.low <= truth <= r.high
    assert 0.93 <= hits / 1000 <= 0.97


def halves_frame(sd_half: float, runs: int, *, seed: int = 0) -> pd.DataFrame:
    """Rows as ``update`` writes them: runs spread over 3 cells, halves around U = 2,000."""
    rng = np.random.default_rng(seed)
    errors = rng.normal(0, sd_half, (runs, 2))
    return pd.DataFrame(
        {
            "cell": [f"c{i % 3}" for i in range(runs)],
            "seed": range(runs),
            "budget_factor": 1,
            "grid": "semi-natural",
            "C": 64,
            "updates": 2000.0,
            "transition": True,
            "censored": False,
            "even_updates": 2000 * 10 ** errors[:, 0],
            "even_transition": True,
            "odd_updates": 2000 * 10 ** errors[:, 1],
            "odd_transition": True,
            "n_long": None,
        }
    )


def law_frame(sd_seed: float, seeds: int = 5, *, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {
                "cell": f"c{c}",
                "seed": s,
                "status": "done",
                "transition": True,
                "censored": False,
                "updates": 2000 * 10 ** rng.normal(0, sd_seed),
            }
            for c in range(3)
            for s in range(seeds)
        ]
    )


@pytest.mark.parametrize(
    ("sd_half", "sd_seed", "runs", "says"),
    [
        (0.01, 0.15, 10, "estimator noise is small next to seed noise"),
        (0.30, 0.05, 10, "estimator noise on half the checkpoints is not small next to seed noise"),
        (0.06, 0.12, 10, "inconclusive at this scale"),  # the ratio near the margin 0.5
        (0.01, 0.15, 3, "pending: 3 of 5 seeds"),
    ],
)
def test_the_estimator_verdict_flips_with_the_data(sd_half, sd_seed, runs, says):
    frame, law = halves_frame(sd_half, runs), law_frame(sd_seed)
    refit = h.refitted(frame)
    variance, df = h.between_seeds(law, refit.cell.unique())
    assert df == 12 and variance == pytest.approx(
        np.mean([np.var(np.log10(g.updates), ddof=1) for _, g in law.groupby("cell")])
    )
    assert h.verdict_of(h.noise_ratio(refit.d, variance, df)) == says
    assert f"**{says}**" in "\n".join(h.section_lines(frame, law))


def test_runs_without_a_placed_point_or_a_half_transition_are_left_out():
    frame = halves_frame(0.01, 6)
    frame.loc[0, "censored"] = True
    frame.loc[1, "odd_transition"] = False
    assert sorted(h.refitted(frame).seed) == [2, 3, 4, 5]
    assert "6 run(s) refitted, 4 placed" in h.halves_lines(frame, law_frame(0.1))[0]


@pytest.mark.parametrize(("factor", "says"), [(1.02, "does not move"), (3.0, "moves")])
def test_the_probe_length_verdict_flips_with_the_data(factor, says):
    frame = halves_frame(0.01, 6).assign(n_long=64, long_transition=True, long_censored=False)
    jitter = 10 ** np.random.default_rng(2).normal(0, 0.01, len(frame))
    frame["long_updates"] = frame.updates * factor * jitter
    ratio, left = pl.probe_ratio(frame)
    assert left == 0 and 10**ratio.value == pytest.approx(factor, rel=0.03)
    assert f"the probe's length {says} the emergence point" in "\n".join(pl.probe_lines(frame))


@pytest.mark.parametrize(
    ("late", "says"),
    [
        (1.2, "the probe's length does not move the emergence point"),
        (2.0, "inconclusive at this scale"),
    ],
)
def test_a_run_placed_under_one_probe_only_bounds_the_ratio_and_can_block_agreement(late, says):
    frame = halves_frame(0.01, 6).assign(
        n_long=64, long_transition=True, long_censored=False, steps=4000
    )
    frame["long_updates"] = frame.updates * 1.02
    frame.loc[0, "long_censored"] = True  # placed at n = 16 only: its ratio is at least ...
    frame.loc[0, "long_updates"] = 2000.0 * late
    frame.loc[1, "transition"] = False  # placed at n = C/2 only: at most U_long / budget
    ratio, left = pl.probe_ratio(frame)
    bounds = pl.probe_bounds(frame)
    assert left == 2 and bounds == [
        ("c0 seed 0", "at least", pytest.approx(late)),
        ("c1 seed 1", "at most", pytest.approx(2040 / 4000)),
    ]
    # the second bound (0.51 <= 1/1.5) lies outside the margin too: drop it to see the first
    frame.loc[1, "transition"] = True
    text = "\n".join(pl.probe_lines(frame))
    assert f"**{says}**" in text
    assert f"c0 seed 0, ratio at least {late:.2f}" in text


def test_each_grid_gets_its_own_probe_length_verdict():
    frame = halves_frame(0.01, 12).assign(
        n_long=64, long_transition=True, long_censored=False, steps=4000
    )
    frame["long_updates"] = frame.updates * 1.02
    fixed = frame.index[6:]
    frame.loc[fixed, "grid"] = "fixed-structure"
    frame.loc[fixed, "long_updates"] = frame.loc[fixed, "updates"] * 3
    lines = pl.probe_lines(frame)
    said = {line.split(":")[0]: line for line in lines if line.startswith("- ")}
    assert "does not move" in said["- semi-natural"] and "over 6 run(s)" in said["- semi-natural"]
    assert "**the probe's length moves the emergence point**" in said["- fixed-structure"]


def test_no_run_folders_says_so():
    text = "\n".join(h.section_lines(h.read(Path("/no/such.csv")), law_frame(0.1)))
    assert "No run folders yet" in text


@pytest.mark.slow
def test_a_trained_run_goes_through_the_pass_and_resumes(tmp_path, cache_dir, counted):
    from ihprobe.training.trainer import train
    from lab.studies.forecast.cells import DEMO

    out = tmp_path / "law"
    # the forecast study's pinned demo run, on a log schedule of 16 checkpoints
    config = replace(
        DEMO, out=str(out / "fx-tiny" / "seed0-x1"), checkpoints="log", n_checkpoints=16
    )
    run = train(config)
    grid = run_emergence(run, **h.SCAN, cache=run / "trajectory-cache")  # as the grid does
    (run / "result.json").write_text(json.dumps({"updates": grid.updates}))
    counted.clear()
    cells = {"fx-tiny": {"grid": "fixed-structure"}, "other": {"grid": "semi-natural"}}
    runs = h.finished_runs(cells, [0, 1], [1, 2], lambda c, s, f: out / c / f"seed{s}-x{f}")
    assert [shape["cell"] for _, shape in runs] == ["fx-tiny"]
    csv = tmp_path / "halves.csv"
    frame = h.update(runs, csv)
    steps = len(list((run / "checkpoints").glob("step-*")))
    assert len(counted) == steps  # only the n = C/2 probe was new: n = 16 came from the cache
    (row,) = frame.to_dict("records")
    assert row["n_long"] == 32 and row["checkpoints"] == steps
    assert row["transition"] and grid.transition, grid.reason  # the induction heads formed
    assert row["updates"] == pytest.approx(grid.updates)  # the grid's own point, refitted
    counted.clear()
    again = h.update(runs, csv)
    assert counted == [] and len(again) == 1  # resumed: nothing probed again
    assert "fx-tiny" in "\n".join(h.section_lines(again, law_frame(0.1)))


@pytest.mark.slow  # the report's regime lines read the corpus: about 3 s
def test_the_law_scripts_halves_flag_refits_each_finished_folder_into_the_report(
    tmp_path, monkeypatch
):
    from lab.studies.law import run as law

    out = tmp_path / "law"
    done = {("sn-B8-C128", 3, 1), ("sn-B8-C128", 4, 2), ("fx-B8-C64", 3, 1)}
    for cell, seed, factor in done | {("sn-B8-C32", 3, 1)}:  # the last one still training
        folder = law.run_dir(str(out), cell, seed, factor)
        (folder / "checkpoints").mkdir(parents=True)
        if (cell, seed, factor) in done:
            (folder / "result.json").write_text("{}")
    frame = halves_frame(0.01, 1)
    computed = []

    def fake_row(folder, shape):  # the refit itself is tested above; here only the wiring
        computed.append((shape["cell"], shape["seed"], shape["budget_factor"]))
        return {**frame.iloc[0].to_dict(), **shape, "checkpoints": 0}

    monkeypatch.setattr(h, "run_row", fake_row)
    monkeypatch.setattr(h, "CSV", tmp_path / "halves.csv")
    monkeypatch.setattr(law, "OUT_CSV", tmp_path / "law.csv")
    monkeypatch.setattr(law, "OUT_MD", tmp_path / "law.md")
    monkeypatch.setattr(sys, "argv", ["validate_papers_law.py", "--halves", "--out", str(out)])
    law.main()
    assert set(computed) == done and len(h.read()) == 3
    assert not law.OUT_MD.exists()  # another --out never overwrites the committed results
    text = law.results_files(str(out))[0].read_text()
    assert "## Without training: interleaved halves" in text and "3 run(s) refitted" in text
    law.main()  # resumed: every folder has its row
    assert len(computed) == 3


def test_the_replayed_forecast_finds_a_point_the_law_prior_misses():
    table = sigmoid_table(2400)  # B 16, C 128: the law says about 13,000 updates
    full = emergence(table, batch_size=16, context=128)
    fields = lf.forecast_fields(full, 16, 128, 8800)
    assert not fields["prior_covered"]  # 80% of the prior lies above 5,000 updates
    assert fields["f50_covered"] and fields["f50_width"] < fields["prior_width"] / 2
    placed = {**fields, "cell": "c", "transition": True, "censored": False}
    frame = pd.DataFrame([placed] * 5 + [{**placed, "censored": True}])
    text = "\n".join(lf.forecast_lines(frame))
    assert "| 50% of the run | 5/5 1.00" in text and "adds information" in text
    assert "5 run(s) of 1 cell(s) placed in full, 1 censored" in text
    assert lf.forecast_lines(frame.drop(columns="f10_covered")) == []


@pytest.mark.parametrize("left_out, worst", [(0, None), (1, "overconfident"), (6, "overconfident")])
def test_the_runs_without_a_point_are_counted_the_way_worst_for_the_forecast(left_out, worst):
    """Placed runs alone say 'adds information' (narrower, covers as often as the prior); a
    run without a point to cover, counted as the forecast's miss and the prior's hit, turns
    that into 'covers less often' in its own column, and no such column without one."""
    row = {"cell": "c", "transition": True, "censored": False, "prior_width": 6.0}
    row |= {lf.column(f, "width"): 2.0 for f in (0.1, 0.3, 0.5)}
    hits = [{lf.column(f, "covered"): hit for f in (0.1, 0.3, 0.5)} for hit in (1, 1, 1, 0, 0)]
    placed = [{**row, **h, "prior_covered": bool(h["f10_covered"])} for h in hits]
    censored = [{**placed[3], "censored": True}] * left_out
    text = "\n".join(lf.forecast_lines(pd.DataFrame(placed + censored)))
    table = [line for line in text.splitlines() if line.startswith("| 50% of the run")]
    assert "| 3/5 " in table[0] and "adds information: narrower, covers as often" in table[0]
    assert ("worst case" in text) is (worst is not None)
    if worst:
        n = 5 + left_out
        assert f"3/{n} against {3 + left_out}/{n}: narrower but covers less often" in table[0]


def test_a_forecast_that_covers_far_more_often_still_informs_in_the_worst_case():
    """The prior covers none of the placed runs: one run without a transition, counted as its
    hit and the forecast's miss, leaves the forecast ahead (3 of 6 against 1 of 6)."""
    row = {"cell": "c", "transition": True, "censored": False, "prior_width": 6.0}
    row |= {lf.column(f, "width"): 2.0 for f in (0.1, 0.3, 0.5)}
    hits = [{lf.column(f, "covered"): hit for f in (0.1, 0.3, 0.5)} for hit in (1, 1, 1, 0, 0)]
    placed = [{**row, **h, "prior_covered": False} for h in hits]
    flat = {**placed[0], "transition": False}  # no transition at all: no point to cover
    text = "\n".join(lf.forecast_lines(pd.DataFrame([*placed, flat])))
    assert "1 censored or without a transition has no point to cover" in text
    assert "| 3/6 against 1/6: adds information: narrower, covers as often |" in text
