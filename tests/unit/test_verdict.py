"""The one verdict of an ablation (``AblationResult.verdict``): each of its four answers on a
constructed result, the rule stated once and shown verbatim by the docs and both reports, and
the views (CLI, demo summary) using it rather than a verdict of their own."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from ihprobe.causal.results import ANSWERS, VERDICT_RULE, AblationResult
from ihprobe.figures.ablation import report_sections
from ihprobe.figures.demo_report import ABLATION_HOWTO
from ihprobe.figures.demo_text import compare_note
from ihprobe.figures.report import html_page
from ihprobe.io.provenance import Provenance

ROOT = Path(__file__).resolve().parents[2]
DISTINCT = [[(1, h), (0, i % 4)] for i, h in enumerate((0, 1, 3) * 7)][:20]  # 20 distinct sets
NOISE = [0.01 * ((7 * i) % 5 - 2) for i in range(20)]  # draws within +-0.02 of clean


def _result(values, draws=DISTINCT, *, top_ps=0.9, repeat=False) -> AblationResult:
    """Top set L1H2 (prefix matching ``top_ps``) against ``draws``; AR accuracy ``values``."""
    scores = torch.full((2, 4), 0.02)
    scores[1, 2] = top_ps
    settings = {"baseline": "layer-matched", "draws_repeat": repeat, "seed": 0}
    if repeat:
        settings["distinct_sets"] = len({tuple(d) for d in draws})
    return AblationResult(
        Provenance("m"),
        "prefix_matching",
        scores,
        [(1, 2)],
        draws,
        {"ar_accuracy": torch.tensor(values)},
        settings,
    )


def test_a_set_far_more_harmful_than_random_is_load_bearing():
    verdict = _result([0.9, 0.1, *[0.9 + e for e in NOISE]]).verdict()
    assert verdict.answer == "load-bearing" and verdict.metric == "ar_accuracy"
    sentence = str(verdict)
    assert "L1H2 changes ar_accuracy by -0.8" in sentence and "p = 0.048" in sentence
    assert sentence.endswith(
        "load-bearing: the model depends on these heads more than on random ones."
    )


def test_a_set_that_costs_what_random_heads_cost_is_a_signature_only():
    verdict = _result([0.9, 0.9, *[0.9 + e for e in NOISE]]).verdict()
    assert verdict.answer == "signature only"
    assert "costs no more than removing random heads" in str(verdict)


def test_too_few_draws_are_inconclusive():
    verdict = _result([0.9, 0.5, 0.89, 0.2], [[(1, 0)], [(1, 1)]]).verdict()
    assert verdict.answer == "inconclusive"


def test_repeated_sets_read_the_distinct_sets_p():
    """Twenty draws of three distinct sets give p = 1/21 over draws but 1/4 over the sets: as
    harmful a top set is then not called load-bearing."""
    draws = [[(1, h)] for h in (0, 1, 3) * 7][:20]
    values = [0.9, 0.1, *[0.9 + e for e in NOISE]]
    verdict = _result(values, draws, repeat=True).verdict()
    assert verdict.answer == "inconclusive"
    assert "p = 0.048, over the distinct sets 0.25" in str(verdict)
    assert "only 3 distinct random sets exist" in verdict.reason


def test_one_distinct_set_drawn_twenty_times_has_no_index():
    """A top set of three of a layer's four heads leaves one layer-matched set: its twenty
    draws are one measurement, whose spread is zero by construction, so the index is undefined
    (NaN), not infinite, and the verdict is inconclusive."""
    draws = [[(1, 0)]] * 20
    result = _result([0.9, 0.1, *[0.85] * 20], draws, repeat=True)
    row = result.summary().set_index("metric").loc["ar_accuracy"]
    assert row.distinct_sets == 1 and np.isnan(row.load_bearing_index)
    assert row.p_value == pytest.approx(1 / 21) and row.p_distinct == 0.5
    assert result.verdict().answer == "inconclusive"


def test_sets_that_exist_and_sets_drawn_are_told_apart():
    """Four sets exist, twenty draws hit three of them: the sentence gives both counts."""
    draws = [[(1, h)] for h in (0, 1, 3) * 7][:20]
    result = _result([0.9, 0.1, *[0.9 + e for e in NOISE]], draws, repeat=True)
    result.settings["distinct_sets"] = 4
    verdict = result.verdict()
    assert "(only 3 distinct sets drawn, of 4 that exist)" in str(verdict)  # the table's 3
    assert result.summary().set_index("metric").loc["ar_accuracy", "distinct_sets"] == 3
    assert "only 4 distinct random sets exist (3 of them drawn)" in verdict.reason


def test_no_head_above_the_threshold_means_nothing_to_test_whatever_the_numbers():
    """The same harmful numbers as the load-bearing case, but the top head's prefix matching is
    0.018 (a random-init model's best, below chance 0.021): there is no induction head."""
    verdict = _result([0.9, 0.1, *[0.9 + e for e in NOISE]], top_ps=0.018).verdict()
    assert verdict.answer == "no induction heads to test"
    assert "0.018, below the 0.3 that counts as formed" in verdict.reason


def test_the_rule_names_every_answer_and_every_view_states_it_verbatim():
    for answer in ANSWERS:
        assert answer.split()[0] in VERDICT_RULE.lower()
    science = " ".join((ROOT / "docs" / "methods" / "ablation.md").read_text().split())
    assert VERDICT_RULE in science  # documented once, in the same words
    assert ABLATION_HOWTO["verdict"] == html.escape(VERDICT_RULE)  # the demo's How to read
    result = _result([0.9, 0.1, *[0.9 + e for e in NOISE]])
    page = html_page("t", report_sections([result]))
    assert html.escape(VERDICT_RULE) in page  # the ablation report's method
    assert f"<b>Verdict.</b> {html.escape(str(result.verdict()))}" in page


@pytest.mark.parametrize(
    "view",
    ["ihprobe/cli/ablate.py", "ihprobe/jobs/demo_summary.py", "ihprobe/figures/demo_report.py"],
)
def test_views_call_the_results_verdict_and_keep_no_rule_of_their_own(view):
    source = (ROOT / view).read_text()
    assert ".verdict(" in source
    assert "load_bearing_index >" not in source and "p <= 0.05" not in source


def test_compare_note_says_what_budget_the_law_asks_for_when_an_arm_forms_no_head():
    rows = [
        {
            "run": "main",
            "producer": "repeats",
            "ps_final": 0.74,
            "steps": 500,
            "law_updates": 15768.0,
        },
        {
            "run": "natural",
            "producer": "natural",
            "ps_final": 0.017,
            "steps": 500,
            "law_updates": 15768.0,
        },
    ]
    note = compare_note(pd.DataFrame(rows))
    assert note.startswith("natural formed no induction head at this budget (max PS 0.017")
    assert "the law predicts 15,768" in note and "--steps 15800" in note
    assert "8.2M tokens" in note  # the measured runs that formed none
    rows[1]["ps_final"] = 0.5
    assert compare_note(pd.DataFrame(rows)) is None  # both formed: nothing to say


def test_a_demo_run_too_short_is_pointed_to_the_demo_budget_not_the_law():
    rows = [
        {
            "run": "main",
            "producer": "repeats",
            "ps_final": 0.03,
            "steps": 100,
            "law_updates": 15788.0,
        }
    ]
    note = compare_note(pd.DataFrame(rows), default_steps=500)
    assert "--steps 500" in note and "--steps 15800" not in note
    assert "--steps 15800" in compare_note(pd.DataFrame(rows))  # no default known: the law's
