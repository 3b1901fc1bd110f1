"""The verdicts of the papers' validation (benchmarks/validate_papers_*.py) follow the data:
each rule is tried against agreeing, disagreeing and undecidable intervals, and the scripts'
own examples hold."""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import validate_papers_common as common  # noqa: E402
import validate_papers_contrast as contrast  # noqa: E402
import validate_papers_law as law  # noqa: E402


@pytest.mark.parametrize("module", [common, law])
def test_the_scripts_examples_hold(module):
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0


@pytest.mark.parametrize(
    ("ci", "verdict"),
    [((0.30, 0.45), "agrees"), ((0.50, 0.80), "disagrees"), ((0.0, 0.2), "disagrees"),
     ((-1.0, 2.0), "inconclusive at this scale"),
     ((float("nan"),) * 2, "inconclusive at this scale")],
)  # fmt: skip
def test_a_value_verdict_is_chosen_by_the_interval(ci, verdict):
    found, why = common.verdict_value(ci, 0.37, widest=1.0)
    assert found == verdict and why


def test_an_order_verdict_flips_with_the_data_and_with_the_claim():
    high, low, overlap = (0.8, 0.9), (0.1, 0.2), (0.15, 0.85)
    assert common.verdict_order(high, low)[0] == "agrees"
    assert common.verdict_order(low, high)[0] == "disagrees"
    assert common.verdict_order(high, low, expected=False)[0] == "disagrees"
    assert common.verdict_order(overlap, low)[0] == "inconclusive at this scale"
    assert common.verdict_order((float("nan"),) * 2, low)[0] == "inconclusive at this scale"


def test_every_law_cell_gets_a_budget_that_grows_as_b_and_c_shrink():
    budgets = {name: law.budget(cell["B"], cell["C"]) for name, cell in law.cells().items()}
    assert budgets["sn-B8-C32"] > budgets["sn-B16-C32"] > budgets["sn-B32-C32"]
    assert budgets["sn-B8-C32"] > budgets["sn-B8-C64"]


def contrast_frame(
    natural_ps: float, backward_anti: float, seeds=(0, 1, 2), natural_perplexity: float = 7.0
) -> pd.DataFrame:
    """Three seeds per arm with a little spread; the natural arm's PS and perplexity and the
    backward arm's anti-induction set by the test (every Bi-Induct arm's perplexity is 8)."""
    rows = []
    for arm in contrast.ARMS:
        for seed in seeds:
            jitter = 0.01 * seed
            rows.append({
                "arm": arm, "seed": seed, "status": "done",
                "max_ps": (natural_ps if arm == "natural" else 0.5) + jitter,
                "max_forward_induction": (0.9 if arm == "forward" else 0.1) + jitter,
                "max_anti_induction": (backward_anti if arm == "backward" else 0.03) + jitter,
                "global-layer-matched:load_bearing_index": (3.0 if arm == "natural" else 1.0)
                + jitter,
                "natural_perplexity": (natural_perplexity if arm == "natural" else 8.0) + jitter,
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_contrast_verdicts_follow_whether_natural_text_formed_heads():
    without = dict((c, v) for c, v, _ in contrast.verdicts(contrast_frame(0.02, 0.03)))
    with_heads = dict((c, v) for c, v, _ in contrast.verdicts(contrast_frame(0.6, 0.03)))
    natural = "natural-only models have a central, load-bearing induction circuit"
    assert without[natural] == "inconclusive at this scale"
    assert with_heads[natural] == "agrees"
    redundant = [c for c in with_heads if "redundant" in c]
    assert all(with_heads[c] == "agrees" for c in redundant)
    assert all(without[c] == "inconclusive at this scale" for c in redundant)


def test_contrast_anti_induction_verdict_flips_with_the_backward_arm():
    claim = "anti-induction stays near zero when trained on backward snippets"
    low = dict((c, v) for c, v, _ in contrast.verdicts(contrast_frame(0.6, 0.03)))
    high = dict((c, v) for c, v, _ in contrast.verdicts(contrast_frame(0.6, 0.7)))
    assert (low[claim], high[claim]) == ("agrees", "disagrees")


def test_contrast_perplexity_verdicts_need_no_heads_and_flip_with_the_data():
    claims = [f"natural-only reaches a lower natural-text perplexity than Bi-Induct {arm}"
              for arm in ("forward", "backward", "balanced")]  # fmt: skip
    for perplexity, expected in ((7.0, "agrees"), (9.0, "disagrees"),
                                 (8.0, "inconclusive at this scale")):  # fmt: skip
        found = dict(
            (c, v)
            for c, v, _ in contrast.verdicts(
                contrast_frame(0.02, 0.03, natural_perplexity=perplexity)
            )
        )
        assert [found[c] for c in claims] == [expected] * 3, perplexity


def test_contrast_verdicts_wait_for_every_seed():
    frame = contrast_frame(0.6, 0.03)
    frame.loc[(frame.arm == "backward") & (frame.seed == 2), "status"] = "pending"
    found = dict((c, v) for c, v, _ in contrast.verdicts(frame))
    assert found["anti-induction stays near zero when trained on backward snippets"] == "pending"


def law_frame(b: float, c: float) -> pd.DataFrame:
    """Every law cell done, its emergence from U = 1e5 / (B^b C^c) with a few % seed noise
    (the size and schedule cells at the base cell's point, whatever their size)."""
    rng = np.random.default_rng(0)
    rows = []
    for name, cell in law.cells().items():
        for seed in law.SEEDS:
            updates = 1e5 / (cell["B"] ** b * cell["C"] ** c) * rng.lognormal(0, 0.03)
            rows.append({"cell": name, "seed": seed, "grid": cell["grid"], "B": cell["B"],
                         "C": cell["C"], "status": "done", "transition": True,
                         "censored": False, "updates": updates, "steps": 10**6})  # fmt: skip
    return pd.DataFrame(rows)


def test_law_fit_verdicts_follow_the_exponents_the_data_hold():
    agreeing = " ".join(law.fit_lines(law_frame(0.37, 0.62), "semi-natural"))
    disagreeing = " ".join(law.fit_lines(law_frame(0.9, 0.1), "semi-natural"))
    assert "b agrees" in agreeing and "c agrees" in agreeing
    assert "b disagrees" in disagreeing and "c disagrees" in disagreeing
    assert "b fixed at 0" in " ".join(law.fit_lines(law_frame(0.37, 0.62), "fixed-structure", b=0))


def test_size_verdict_reads_the_ratio_of_emergence_points():
    same = law_frame(0.37, 0.62)
    lines = law.compared_lines(same)
    assert all("**agrees**" in line for line in lines if "model size" in line)
    slower = same.copy()
    slower.loc[slower.cell == "size-d128", "updates"] *= 3
    assert "**disagrees**" in law.compared_lines(slower)[0]


def test_censored_runs_are_left_out_of_the_fit_and_refitted_as_a_sensitivity_check():
    frame = law_frame(0.37, 0.62)
    plain = " ".join(law.fit_lines(frame, "semi-natural"))
    assert "sensitivity" not in plain
    late = frame.index[(frame.cell == "sn-B8-C128") & (frame.seed == 1)]
    frame.loc[late, "censored"] = True
    frame.loc[late, "updates"] = 1e6  # a start far off the law
    lines = " ".join(law.fit_lines(frame, "semi-natural"))
    assert "(26 points, 1 without a transition or censored)" in lines
    assert "with the 1 censored run(s)' start points included (27 points)" in lines


def test_a_cell_that_never_transitions_gives_a_lower_bound_not_a_ratio():
    frame = law_frame(0.37, 0.62)
    wide = frame.cell == "size-d128"
    frame.loc[wide, "transition"] = False
    frame.loc[wide, "updates"] = np.nan
    frame.loc[wide, "steps"] = 15300
    line = law.compared_lines(frame)[0]
    top = law.bootstrap_mean(frame[frame.cell == "sn-B8-C64"].updates)[2]
    assert "**disagrees**" in line and f"{15300 / top:.2f}x the upper end" in line
    frame.loc[wide, "steps"] = int(top * 1.2)  # a budget too short to say much
    assert "**inconclusive at this scale**" in law.compared_lines(frame)[0]


def test_a_cell_with_a_censored_seed_is_replaced_by_its_reruns_only_once_all_are_done(tmp_path):
    args = type("Args", (), {"out": str(tmp_path)})()
    cell, budget = "sn-B8-C128", 16400
    for seed in law.SEEDS:  # seed 1 censored at the cell's budget
        run = law.run_dir(args.out, cell, seed)
        run.mkdir(parents=True)
        common.write_result(run, {"transition": True, "censored": seed == 1, "steps": budget,
                                  "updates": 12867.0 if seed == 1 else 6000.0 + seed,
                                  "budget_factor": 1})  # fmt: skip
    assert law.censored_cells(args) == [cell]

    def row(seed):
        return law.collect(args).set_index(["cell", "seed"]).loc[(cell, seed)]

    for seed in law.SEEDS:
        rerun = law.run_dir(args.out, cell, seed, law.EXTEND)
        assert rerun.name == f"seed{seed}-x{law.EXTEND}"
        rerun.mkdir()
        common.write_result(rerun, {"transition": True, "censored": False,
                                    "steps": budget * law.EXTEND, "updates": 7000.0 + seed,
                                    "budget_factor": law.EXTEND})  # fmt: skip
        if seed != law.SEEDS[-1]:  # a partly rerun cell keeps its first runs, censored one too
            assert bool(row(1).censored) and row(0).updates == 6000
            assert law.rerun_lines(law.collect(args), args.out) == []
    assert [row(seed).updates for seed in law.SEEDS] == [7000.0 + seed for seed in law.SEEDS]
    assert not bool(row(1).censored) and row(1).steps == budget * law.EXTEND
    said = " ".join(law.rerun_lines(law.collect(args), args.out))
    assert f"`{cell}`: seed 0 6,000 -> 7,000; seed 1 >= 12,867 -> 7,001; seed 2 6,002" in said
    assert law.censored_cells(args) == []  # nothing left to extend
