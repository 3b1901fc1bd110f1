"""The FV training study's verdicts, each against both outcomes, on synthetic rows."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from lab.studies.fv_training import STEPS
from lab.studies.fv_training.measure import chosen, kind_columns
from lab.studies.fv_training.report import report
from lab.studies.fv_training.verdicts import (
    fv_verdict,
    induction_verdict,
    kind_verdict,
    mean_interval,
    moves,
    relation_verdict,
)

NONE_USED = {"copy_word": [0.0, 0.1, False], "next_item": [0.04, 0.2, False]}
USED = {"copy_word": [0.8, 0.1, True], "next_item": [0.04, 0.2, False]}


def point(step, ps=((0.0, 0.0), (0.0, 0.0)), fv=(), tasks=NONE_USED) -> dict:
    scores = [[0.01, 0.0], [0.0, 0.02]] if any(v[2] for v in tasks.values()) else [[None] * 2] * 2
    return {"step": step, "tokens": step * 1024, "ps": [list(r) for r in ps], "fv": scores} | {
        "fv_heads": [list(h) for h in fv],
        "fv_heads_significant": [list(h) for h in fv] + ([[0, 0]] if fv else []),
        "tasks": tasks,
    }


def row(seed, points, placed=True, answers=None) -> dict:
    r = {"cell": "B4-C256", "seed": seed, "status": "done", "transition": placed}
    r |= {"censored": False, "updates": 3000.0 if placed else float(STEPS), "max_ps": 0.3}
    r |= {"train_loss_final": 3.1, "series": json.dumps(points)}
    r |= kind_columns(None, "no task above chance")
    for key, answer in (answers or {}).items():
        r |= {f"kind_{key}_answer": answer, "kind_error": "", f"kind_{key}_load_bearing_index": 0.5}
    return r


INDUCTION = ((0.0, 0.0), (0.4, 0.0))  # L1H0 an induction head


def test_induction_verdict_both_ways():
    formed = [row(0, [point(1000, INDUCTION)]), row(1, [point(1000)], placed=False)]
    said = induction_verdict(formed)
    assert said.startswith("Induction heads formed in 1 of 2 seeds") and "seed 0: L1H0" in said
    flat = [row(s, [point(1000)], placed=False) for s in range(3)]
    assert induction_verdict(flat).startswith(
        "No induction head formed by 8,000 updates in any of 3"
    )
    assert induction_verdict([{"seed": 0, "status": "pending"}]).startswith("pending")


def test_fv_verdict_no_task_some_task_and_fv_heads():
    assert "no FV heads at this scale" in fv_verdict([row(0, [point(1000), point(2000)])])
    assert fv_verdict([row(0, [point(2000)])]).startswith("No task is done above chance")
    tasks_only = fv_verdict([row(0, [point(2000, tasks=USED)])])
    assert "do some task above chance, but no head's FV score" in tasks_only
    found = fv_verdict(
        [row(0, [point(1000, tasks=USED), point(2000, fv=[(1, 1)], tasks=USED)]), row(1, [])]
    )
    assert found == (
        "FV heads appear in 1 of 1 seeds: seed 0: first at 2,000 updates (L1H1), at the last "
        "checkpoint L1H1."
    )


def test_a_head_that_moves_is_found_and_one_that_stays_is_not():
    moving = [point(1000, INDUCTION, tasks=USED), point(2000, fv=[(1, 0)], tasks=USED)]
    assert moves(moving) == [((1, 0), "induction to FV", 1000, 2000)]
    said = relation_verdict([row(0, moving)])
    assert "Heads that move: seed 0: L1H0 induction to FV (1,000 to 2,000 updates)." in said
    staying = [point(1000, INDUCTION, tasks=USED), point(2000, INDUCTION, [(1, 1)], tasks=USED)]
    assert moves(staying) == []
    said = relation_verdict([row(0, staying)])
    assert said.endswith("No head moves from one kind to the other in any seed.")
    assert "both an induction head and an FV head in 0 of 1 seeds" in said
    both = [point(2000, INDUCTION, [(1, 0)], tasks=USED)]
    assert "in 1 of 1 seeds" in relation_verdict([row(0, both)])
    assert relation_verdict([row(0, [point(1000, INDUCTION)])]).startswith("No head can move")
    back = [point(1000, fv=[(0, 1)], tasks=USED), point(2000, ((0, 0.5), (0, 0)), tasks=USED)]
    assert moves(back) == [((0, 1), "FV to induction", 1000, 2000)]


def test_kind_verdict_counts_answers_and_says_when_they_differ():
    same = [row(s, [], answers={"fv_hits1": "load-bearing"}) for s in range(3)]
    assert kind_verdict(same, "fv", "hits@1") == "load-bearing in every seed (3)"
    mixed = same[:2] + [row(2, [], answers={"fv_hits1": "inconclusive"})]
    assert kind_verdict(mixed, "fv", "hits@1") == (
        "2 load-bearing, 1 inconclusive of 3 seeds: no answer common to every seed"
    )
    assert kind_verdict([row(0, [])], "fv", "hits@1") == "no table in any of 1 seeds"
    assert kind_verdict([], "fv", "hits@1") == "pending"


def test_mean_interval_is_the_t_interval_over_seeds():
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.303; sd 1; n 3
    assert mean == 2.0 and hi - mean == pytest.approx(4.303 / math.sqrt(3), abs=1e-3)
    assert math.isnan(mean_interval([1.0])[1]) and math.isnan(mean_interval([])[0])


def test_the_report_renders_a_csv_round_trip(tmp_path):
    rows = [
        row(0, [point(1000, INDUCTION, tasks=USED), point(2000, fv=[(1, 0)], tasks=USED)]),
        {"cell": "B4-C256", "seed": 1, "status": "pending"},
    ]
    path = tmp_path / "r.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    text = report(pd.read_csv(path), ["Runs: here"])
    assert "1 of 2 seeds finished." in text and "| 1 | pending |" in text
    assert "Heads that move: seed 0: L1H0 induction to FV" in text
    assert "| 0 | - | - | - | - | no table: no task above chance |" in text
    assert "| 2,000 | none | L1H1 0.000 | L1H0 | L0H0, L1H0 | L1H1 0.020 | copy_word |" in text


def test_the_checkpoints_read_are_every_fourth_and_the_last():
    assert chosen(list(range(33))) == [3, 7, 11, 15, 19, 23, 27, 31, 32]
    assert chosen(list(range(8))) == [3, 7] and chosen([]) == []


def test_kind_columns_read_each_cell_of_a_kind_table():
    import ihprobe
    from ihprobe.causal.kinds import COLUMNS

    cells = [
        (kind, measure, "m", -0.1 * i, -0.01, 0.01, 0.1 * i, 0.05 * i, 0.3 * i, answer, "")
        for i, (kind, measure, answer) in enumerate(
            [
                ("fv", "hits@1", "load-bearing"),
                ("fv", "icl_score", "inconclusive"),
                ("prefix_matching", "hits@1", "signature only"),
                ("prefix_matching", "icl_score", "load-bearing"),
            ]
        )
    ]
    table = ihprobe.KindTable(pd.DataFrame(cells, columns=list(COLUMNS)), {})
    got = kind_columns(table)
    assert got["kind_error"] == "" and got["kind_prefix_matching_hits1_answer"] == "signature only"
    assert got["kind_fv_icl_score_load_bearing_index"] == 0.1
    assert got["kind_prefix_matching_icl_score_load_bearing_hi"] == pytest.approx(0.9)
    assert got["kind_fv_hits1_change"] == 0.0 and got["kind_fv_icl_score_change"] == -0.1
