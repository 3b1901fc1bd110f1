"""The natural-text grid's headlines carry their fragility (issue 60 item 2): b's and c's lines
name every single reading that gives another verdict (both ways), the seeds beyond the declared
ones are labelled post hoc with the declared seeds' fit beside them, and the count of runs with
a head is drawn from the CSV."""

from __future__ import annotations

import pandas as pd
import pytest

from ihprobe.dynamics.verdicts import Estimate
from lab.studies.natural_law import claims, report, sensitivity
from lab.tests.test_natural_law_study import law_runs


def test_a_headline_no_reading_moves_says_so():
    frame = law_runs(0.37, 0.62).assign(seed=0, transition=True)
    assert claims.verdicts(frame) == {"b": "agrees", "c": "agrees"}
    notes = sensitivity.fragility(frame)
    assert notes == {name: " No single reading below moves it." for name in "bc"}
    line = next(x for x in claims.fit_lines(frame, notes) if x.startswith("- c = "))
    assert line.endswith("). No single reading below moves it.")


def test_a_headline_names_each_reading_that_moves_it_and_what_it_gives():
    frame = law_runs(0.37, 0.62).assign(seed=0, transition=True)
    runs = claims.runs_of(frame)
    same = {"b": Estimate(0.37, 0.33, 0.41, "m", 1), "c": Estimate(0.62, 0.6, 0.64, "m", 1)}
    wide = same | {"c": Estimate(0.62, 0.2, 1.0, "m", 1)}
    far = same | {"c": Estimate(1.5, 1.2, 1.8, "m", 1)}
    found = [("one", wide, runs), ("two", same, runs), ("three", wide, runs), ("four", far, runs)]
    notes = sensitivity.fragility(frame, found)
    assert notes["b"] == " No single reading below moves it."
    assert notes["c"] == (
        " Fragile: one and three each give inconclusive at this scale; four gives disagrees "
        "(each reading below)."
    )
    assert sensitivity.fragility(frame, []) == {"b": "", "c": ""}  # no fit: no clause


@pytest.mark.slow  # about 15 s on a loaded 2-core machine: every reading's refit
def test_the_recorded_grid_names_the_placed_runs_alone_in_c_s_headline():
    frame = pd.read_csv(claims.__file__.replace("claims.py", "results.csv"))
    found = sensitivity.readings(frame)
    names = [how for how, _, _ in found]
    assert "the placed runs alone" in names and "the declared seeds alone" in names
    notes = sensitivity.fragility(frame, found)
    declared, cells = claims.verdicts(frame), frame.cell[frame.status == "done"].nunique()
    for how, fit, runs in found:  # a reading is named exactly when its verdict differs
        said = claims.verdict(fit["c"], "c", cells, int((~runs.censored).sum()))[0]
        assert (how in notes["c"]) == (said != declared["c"]), how


def test_seeds_beyond_the_declared_ones_are_labelled_post_hoc_with_the_declared_fit_beside():
    one = law_runs(0.37, 0.62).assign(seed=0)
    assert claims.declared_seeds_lines(claims.runs_of(one)) == []
    extra = one[one.cell.isin(["B4-C256", "B8-C256"])].assign(seed=1)
    runs = claims.runs_of(pd.concat([one, extra], ignore_index=True))
    (line,) = claims.declared_seeds_lines(runs)
    alone = claims.fits(claims.runs_of(one))["model"]
    assert line.startswith("- Post hoc: the fit above includes B4-C256 seed 1, B8-C256 seed 1 ")
    assert "(2 runs shared with the size arm), added after the first verdict" in line
    assert f"b = {alone['b'].text('.2f')}: agrees; c = {alone['c'].text('.2f')}: agrees." in line


def test_the_count_of_runs_with_a_head_comes_from_the_csv():
    frame = pd.read_csv(claims.__file__.replace("claims.py", "results.csv"))
    done = frame[frame.status == "done"]
    (line, _) = report.heads_line(done)
    assert line.startswith(f"{int(done.has_head.astype(bool).sum())} of {len(done)} finished runs")
    flipped = done.assign(has_head=False)
    assert (
        report.heads_line(flipped)[0]
        == f"0 of {len(done)} finished runs formed a head (`has_head`)."
    )
