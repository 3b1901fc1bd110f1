"""Post hoc (issue 43): the contrast's per-seed "has a head" proxy passes a seed only when all
three recorded parts pass, claims about heads are judged over the seeds that have one, and
the induction-loss rise is judged both ways, over the seeds with a head only; on the committed
natural-recipe CSV the natural seeds without a head no longer feed a claim about heads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ihprobe.causal.head_check import RULE
from lab.studies.contrast import heads
from lab.studies.contrast import run as contrast
from lab.studies.contrast.claims import SHOWN

ROOT = Path(__file__).resolve().parents[2]
CENTRAL = "natural-only models have a central, load-bearing induction circuit"
HEAD = {"max_ps": 0.4, "max_forward_induction_varied": 0.4, heads.RISE: 0.2}


def row(**changes) -> dict:
    return {"arm": "natural", "seed": 0, "status": "done", **HEAD, **changes}


def test_the_proxy_asks_head_check_s_own_attention_threshold():
    assert heads.PROXY["max_ps"][0] == heads.HEAD_CHECK_PS == RULE.ps


@pytest.mark.parametrize("column", list(heads.PROXY))
def test_each_part_of_the_proxy_alone_can_deny_a_head(column):
    least = heads.PROXY[column][0]
    passing = pd.DataFrame([row(**{column: least}), row(**{column: least * 0.9})])
    assert heads.has_head(passing).tolist() == [True, False]
    missing = pd.DataFrame([row()]).drop(columns=[column])
    assert heads.has_head(missing).tolist() == [False]  # not recorded: not shown to have one
    assert "not recorded" in heads.failed(missing.iloc[0])[0]


def arms(natural_heads: int, natural_rise: float = 0.3, natural_index: float = 3.0):
    """Every arm 5 seeds done, with heads; the natural arm's first ``natural_heads`` seeds have
    one, the others not (PS 0.03), but every natural seed records ``natural_index``."""
    rows = []
    for arm in contrast.ARMS:
        for seed in contrast.SEEDS:
            jitter, natural = 0.01 * seed, arm == "natural"
            headless = natural and seed >= natural_heads
            rows.append(
                {
                    **row(arm=arm, seed=seed),
                    "max_ps": (0.03 if headless else 0.4) + jitter,
                    heads.RISE: (0.0 if headless else natural_rise if natural else 0.1) + jitter,
                    "global-layer-matched:load_bearing_index": (natural_index if natural else 1.0)
                    + jitter,
                }
            )
            for column in (*SHOWN.values(), "train_s"):
                rows[-1].setdefault(column, 0.1 + jitter)
    return pd.DataFrame(rows)


def verdict(frame, claim=CENTRAL):
    return next((v, w) for c, v, w in contrast.verdicts(frame) if c == claim)


def test_claims_about_heads_are_judged_only_over_seeds_with_a_head():
    assert verdict(arms(5))[0] == "agrees"
    said, why = verdict(arms(2))  # the three headless seeds' indices are left out
    assert said == "inconclusive at this scale"
    assert "(t, 2 seeds)" in why and "natural 2 of 5 (seeds 0, 1)" in why
    assert "left out, no head: natural seeds 2, 3, 4" in why
    assert "; none left out" in verdict(arms(5))[1]
    said, why = verdict(arms(0))
    assert said == "inconclusive at this scale" and "no seed of natural has" in why
    perplexity = "natural-only reaches a lower natural-text perplexity than Bi-Induct forward"
    assert "(Welch t, 5 and 5 seeds)" in verdict(arms(0), perplexity)[1]  # not about heads


def rise(frame, arm="forward") -> tuple[str, str, str]:
    """(seeds used, verdict, why) of the induction-loss rise claim against ``arm``."""
    found = [r for r in heads.rise_verdicts(frame, contrast.ARMS) if r[0].endswith(f"{arm}'s")]
    assert len(found) == 1  # one verdict per arm: over the seeds with a head only
    return found[0][1:]


def test_the_induction_loss_rise_claim_flips_with_the_data_and_needs_heads():
    seeds, said, why = rise(arms(5, natural_rise=0.3))
    assert said == "agrees" and "(Welch t, 5 and 5 seeds)" in why
    assert seeds.endswith("; none left out")
    assert rise(arms(5, natural_rise=0.06))[1] == "disagrees"
    seeds, said, why = rise(arms(2, natural_rise=0.3))  # 3 headless seeds: left out, named
    assert said == "inconclusive at this scale" and "(Welch t, 2 and 5 seeds)" in why
    assert seeds == (
        "natural 2 of 5 (seeds 0, 1) and forward 5 of 5 (seeds 0, 1, 2, 3, 4); "
        "left out, no head: natural seeds 2, 3, 4"
    )
    seeds, said, why = rise(arms(0))
    assert said == "inconclusive at this scale" and why == "no seed with a head in both arms"


def test_no_line_calls_the_induction_loss_rise_b_s_scale():
    frame = pd.read_csv(ROOT / "lab" / "studies" / "contrast" / "RESULTS_papers_contrast-docs.csv")
    text = "\n".join(heads.section(frame, contrast.ARMS, (2, 4)))
    assert "own scale" not in text and "It keeps its own name" in text
    assert "1 of 4 heads in each of the 2 layers here: 2 of 8 heads, 25% of" in text
    assert "1 of 8 heads in each of the 2 layers here: 2 of 16 heads, 12.5% of" in (
        heads.top_share(2, 8)
    )


def test_the_results_file_names_an_arm_that_mixes_head_and_no_head():
    assert (
        "natural: a head in seed(s) 0, 1, none in 2, 3, 4"
        in heads.mixed_note(arms(2), contrast.ARMS)[0]
    )
    assert heads.mixed_note(arms(5), contrast.ARMS) == [
        "- no arm mixes seeds with and without a head."
    ]


def test_on_the_committed_recipe_csv_headless_natural_seeds_feed_no_claim_about_heads():
    frame = pd.read_csv(ROOT / "lab" / "studies" / "contrast" / "RESULTS_papers_contrast-docs.csv")
    yes, no = heads.headed_seeds(frame, "natural")
    low = frame[(frame.arm == "natural") & frame.seed.isin(no)]
    assert (low.max_ps < heads.PROXY["max_ps"][0]).all() and len(no) >= 3
    headed = heads.with_heads(frame)
    kept = headed[(headed.arm == "natural") & (headed.status == "done")]
    assert sorted(kept.seed) == sorted(yes)  # the headless seeds' indices are out of the claims
    said, why = verdict(frame.assign(status="done"))
    assert said == "inconclusive at this scale" and f"natural {len(yes)}" in why
