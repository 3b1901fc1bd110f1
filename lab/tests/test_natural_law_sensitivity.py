"""The natural-text grid's checks added after the data: profile intervals, runs still rising
at their last probe, the declared interval's coverage, and the sentence that says whether each
would move a verdict (both ways)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ihprobe.dynamics.verdicts import Estimate
from lab.studies.natural_law import cells, claims, sensitivity
from lab.tests.test_natural_law_study import law_runs


def curve(values, per_update: int) -> str:
    steps = np.arange(len(values)) * 1000
    return ", ".join(
        f"{s * per_update / 1e6:.2f}: {v:.3f} (0.000)" for s, v in zip(steps, values, strict=True)
    )


def test_a_small_rise_at_the_end_is_found_and_a_flat_curve_is_not():
    k = np.arange(33)
    rising = 0.01 + np.clip((k - 22) / 10, 0, 1) * 0.05  # 0.05 by the last probe: under 0.1
    flat = 0.01 + 0.001 * np.sin(k)
    rows = [
        {"cell": "B4-C64", "curve": curve(rising, 256)},
        {"cell": "B8-C64", "curve": curve(flat, 512)},
        {"cell": "B1-C64", "curve": curve(rising, 64), "censored": False, "transition": True},
    ]
    frame = pd.DataFrame(
        [{"status": "done", "censored": True, "transition": False} | r for r in rows]
    )
    frame["B"], frame["C"] = frame.cell.str[1].astype(int), 64
    starts = sensitivity.rising_starts(frame)
    assert list(starts) == [("B4-C64", 0)]  # a placed run is the declared rule's already
    assert 21_000 <= starts["B4-C64", 0] <= 27_000  # in the first half of the ramp (22k-32k)
    assert sensitivity.flat(frame).tolist() == [False, True, False]  # only the curve at chance


def test_runs_that_never_rose_are_left_out_and_the_rest_is_fitted_as_declared():
    law = law_runs(0.37, 0.62).assign(transition=True)
    never = {"status": "done", "censored": True, "transition": False, "updates": 1e6}
    never["curve"] = curve(0.01 + 0.001 * np.sin(np.arange(33)), 64)
    frame = pd.concat([law, pd.DataFrame([never | {"cell": "B1-C64", "B": 1, "C": 64}] * 3)])
    runs, declared = claims.runs_of(frame), {"b": "agrees", "c": "agrees"}
    assert sensitivity._flat_lines(law, claims.runs_of(law), declared) == []  # none flat
    (line,) = sensitivity._flat_lines(frame, runs, declared)
    alone = claims.fits(claims.runs_of(law))["model"]  # the fit of the runs that rose
    assert line.startswith("- Runs with no rise at all (3 of 23) taken as never forming")
    assert f"b = {alone['b'].text('.2f')}, c = {alone['c'].text('.2f')}" in line
    assert line.endswith("; these give the declared verdicts.")
    moved = sensitivity._flat_lines(frame, runs, {"b": "disagrees", "c": "agrees"})[0]
    assert moved.endswith("; these would give b agrees (declared: disagrees).")


def test_each_check_says_whether_it_moves_a_verdict_both_ways():
    runs = claims.runs_of(law_runs(0.37, 0.62))
    declared = {"b": "agrees", "c": "agrees"}
    same = {name: Estimate(v, v - 0.05, v + 0.05, "m", 1) for name, v in (("b", 0.37), ("c", 0.62))}
    assert sensitivity._changes(declared, same, runs) == "give the declared verdicts"
    wide = same | {"c": Estimate(1.5, 1.0, 2.0, "m", 1)}
    said = sensitivity._changes(declared, wide, runs)
    assert said == "would give c disagrees (declared: agrees)"


def test_profiles_match_wald_without_censoring_and_coverage_is_nominal():
    runs = claims.runs_of(law_runs(0.37, 0.62, noise=0.2, seed=2))
    wald, profile = claims.fits(runs)["model"], sensitivity.profiles(runs)
    for name in ("b", "c"):
        assert profile[name].value == pytest.approx(wald[name].value, abs=1e-4)
        assert profile[name].low == pytest.approx(wald[name].low, abs=1e-3)  # the same t
        assert profile[name].high == pytest.approx(wald[name].high, abs=1e-3)
    open_budget = runs.updates.to_numpy() * 1e3  # nothing is censored
    covered = sensitivity.coverage(runs, open_budget, draws=60, seed=1)
    assert 0.85 <= covered["b"] <= 1 and 0.85 <= covered["c"] <= 1
    assert covered["sigma"] == pytest.approx(0.2, rel=0.4)


@pytest.mark.slow
def test_the_results_file_carries_the_checks_under_their_own_heading():
    frame = pd.read_csv(sensitivity.claims.__file__.replace("claims.py", "results.csv"))
    text = "\n".join(sensitivity.lines(frame))
    assert text.startswith("## Sensitivity (added after the data, before the first verdict)")
    assert "Profile-likelihood intervals: b = " in text and "Coverage of the declared" in text


def test_a_continued_run_is_read_by_the_declared_rule_once_it_has_finished(tmp_path, monkeypatch):
    import json

    from lab.studies.natural_law import extend

    monkeypatch.setattr(extend, "EXTENDED", tmp_path)
    monkeypatch.setattr(extend, "RECORD", tmp_path / "results_extended.csv")
    k = np.arange(49)  # a rise that starts near the old budget's end and goes on past it
    values = 0.01 + np.clip((k - 28) / 6, 0, 1) * 0.2
    run = tmp_path / "B2-C64" / "seed0"
    run.mkdir(parents=True)
    per = 2 * 64
    records = [
        {"step": i * 2000, "tokens": i * 2000 * per, "max_prefix_matching": v, "ar_accuracy": 0}
        for i, v in enumerate(values)
    ]
    (run / "probes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "run.json").write_text(json.dumps({"config": {"steps": 120_000}}))  # still training
    assert extend.reading("B2-C64") is None and extend.continued("B2-C64") is None
    (run / "run.json").write_text(json.dumps({"config": {"steps": 96_000}}))
    extend.record(extend.reading("B2-C64"))
    extend.record(extend.reading("B2-C64"))  # a second reading replaces the first
    row = extend.continued("B2-C64")
    assert len(pd.read_csv(extend.RECORD)) == 1 and row["last"] == 96_000
    assert not row["censored"] and 50_000 <= row["updates"] <= 62_000
    runs = claims.runs_of(law_runs(0.37, 0.62))
    starts = {("B2-C64", 0): 1.0, ("B4-C64", 0): 1.0}
    said = sensitivity._continued_lines(runs, starts, {"b": "x", "c": "x"})
    law = cells.predict_emergence(2, 64).updates
    ratio = f"{row['updates'] / law:.2f}x the law"
    assert said[0].endswith(
        f"B2-C64 placed at {row['updates']:,.0f} updates ({ratio}; max PS 0.210)."
    )
    assert said[1].startswith("  - each in place of its record: b = ")
    assert extend.main(["B3-C64"]) == 2
