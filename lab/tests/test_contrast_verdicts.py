"""[B]'s contrast (``validate_papers_contrast.py``): each claim's verdict flips with the arms'
numbers, waits for five seeds, and says "inconclusive" where natural text formed no heads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.studies.contrast import claims as contrast_claims
from lab.studies.contrast import heads
from lab.studies.contrast import run as contrast

FORWARD = "Bi-Induct forward raises forward induction above natural-only"
NATURAL = "natural-only models have a central, load-bearing induction circuit"
REDUNDANT = [
    f"Bi-Induct {arm}: a distributed, redundant circuit (index below natural's)"
    for arm in ("forward", "balanced")
]


def contrast_frame(
    natural_ps: float, backward_anti: float, seeds=contrast.SEEDS, natural_perplexity: float = 7.0
) -> pd.DataFrame:
    """Every arm done with a little spread; the natural arm's PS and perplexity and the
    backward arm's anti-induction set by the test (every Bi-Induct arm's perplexity is 8)."""
    rows = []
    for arm in contrast.ARMS:
        for seed in contrast.SEEDS:
            jitter = 0.01 * seed
            rows.append(
                {
                    "arm": arm,
                    "seed": seed,
                    "status": "done" if seed in seeds else "pending",
                    "max_ps": (natural_ps if arm == "natural" else 0.5) + jitter,
                    "max_forward_induction": (0.9 if arm == "forward" else 0.1) + jitter,
                    "max_forward_induction_fixed": (0.9 if arm == "forward" else 0.1) + jitter,
                    "max_anti_induction": (backward_anti if arm == "backward" else 0.03) + jitter,
                    "global-layer-matched:load_bearing_index": (3.0 if arm == "natural" else 1.0)
                    + jitter,
                    "natural_perplexity": (natural_perplexity if arm == "natural" else 8.0)
                    + jitter,
                }
            )
            rows[-1]["max_forward_induction_varied"] = rows[-1]["max_ps"]  # a head's, or none
            rows[-1]["per-layer:relative_change"] = rows[-1]["max_ps"] / 2
            for column in (*contrast_claims.SHOWN.values(), "train_s"):  # the table's other columns
                rows[-1].setdefault(column, 0.1 + jitter)
    return pd.DataFrame(rows)


def said(frame) -> dict[str, str]:
    return {claim: verdict for claim, verdict, _ in contrast.verdicts(frame)}


def test_contrast_verdicts_follow_whether_natural_text_formed_heads():
    without, with_heads = said(contrast_frame(0.02, 0.03)), said(contrast_frame(0.6, 0.03))
    natural = "natural-only models have a central, load-bearing induction circuit"
    assert without[natural] == "inconclusive at this scale"
    assert with_heads[natural] == "agrees"
    redundant = [c for c in with_heads if "redundant" in c]
    assert all(with_heads[c] == "agrees" for c in redundant)
    assert all(without[c] == "inconclusive at this scale" for c in redundant)


def test_contrast_anti_induction_verdict_flips_with_the_backward_arm():
    claim = "anti-induction stays near zero when trained on backward snippets"
    low, high = said(contrast_frame(0.6, 0.03)), said(contrast_frame(0.6, 0.7))
    assert (low[claim], high[claim]) == ("agrees", "disagrees")


def test_contrast_perplexity_verdicts_need_no_heads_and_flip_with_the_data():
    claims = [
        f"natural-only reaches a lower natural-text perplexity than Bi-Induct {arm}"
        for arm in ("forward", "backward", "balanced")
    ]
    for perplexity, expected in (
        (7.0, "agrees"),
        (9.0, "disagrees"),
        (8.0, "inconclusive at this scale"),
    ):
        found = said(contrast_frame(0.02, 0.03, natural_perplexity=perplexity))
        assert [found[c] for c in claims] == [expected] * 3, perplexity


def test_contrast_verdicts_wait_for_five_seeds():
    found = said(contrast_frame(0.6, 0.03, seeds=(0, 1, 2)))
    claim = "anti-induction stays near zero when trained on backward snippets"
    assert found[claim] == "pending: 3 of 5 seeds"
    table = contrast.arm_table(contrast_frame(0.6, 0.03, seeds=(0, 1, 2)))
    assert table["max PS"].str.contains(r"\(t, 3 seeds\)").all()


def test_a_seed_without_a_defined_index_is_named_not_hidden():
    """A top set that leaves one distinct random set has no index (NaN): the seed is left out
    of the mean, the table and the claim both say so, and the claim waits only while a seed is
    still to run."""
    frame = contrast_frame(0.6, 0.03)
    first = (frame.arm == "natural") & (frame.seed == 0)
    frame.loc[first, "global-layer-matched:load_bearing_index"] = float("nan")
    claim = "natural-only models have a central, load-bearing induction circuit"
    verdict, why = next((v, w) for c, v, w in contrast.verdicts(frame) if c == claim)
    assert verdict == "inconclusive at this scale"  # every seed has run: none left to fill it
    assert "1 seed(s) without a defined index (the top set leaves one distinct" in why
    assert "(t, 4 seeds) has fewer than 5 defined values" in why and "every arm ran 5 seeds" in why
    frame.loc[(frame.arm == "natural") & (frame.seed == 4), "status"] = "pending"
    verdict, why = next((v, w) for c, v, w in contrast.verdicts(frame) if c == claim)
    assert verdict == "pending: 3 of 5 seeds"  # seed 4 still to run: the claim waits for it
    assert "every arm" not in why
    shown = contrast.arm_table(frame).set_index("arm").loc["natural", "index global, layer-matched"]
    assert "1 seed(s) undefined (one distinct random set), left out" in shown


def test_the_forward_induction_claim_flips_with_the_fixed_length_score_and_waits():
    """The claim reads [B]'s fixed-L score: forward 0.9 over natural 0.1 agrees; the two
    swapped (the other forward-induction column left high) disagrees; 3 forward seeds wait."""
    frame = contrast_frame(0.6, 0.03)
    assert said(frame)[FORWARD] == "agrees"
    swapped = frame.copy()
    fixed = np.where(swapped.arm == "forward", 0.1, np.where(swapped.arm == "natural", 0.9, 0.1))
    swapped["max_forward_induction_fixed"] = fixed + 0.01 * swapped.seed
    assert said(swapped)[FORWARD] == "disagrees"
    short = frame.copy()
    short.loc[(short.arm == "forward") & (short.seed >= 3), "status"] = "pending"
    assert said(short)[FORWARD] == "pending: 3 of 5 seeds"


def with_index(natural: float, others: float) -> pd.DataFrame:
    """Every seed of every arm with a head by the proxy, the layer-matched index planted."""
    frame = contrast_frame(0.6, 0.03)
    index = np.where(frame.arm == "natural", natural, others) + 0.01 * frame.seed
    return frame.assign(**{contrast_claims.INDEX: index})


def test_the_centrality_claims_disagree_where_natural_text_has_no_central_circuit():
    """Natural's index wholly below 0 (random) disagrees with all three; a sixth natural seed
    with no head and a huge index is left out, so it cannot rescue the claims."""
    frame = with_index(-1.0, 1.0)
    assert heads.has_head(frame).all()  # every planted seed is judged
    extra = frame[(frame.arm == "natural") & (frame.seed == 0)].assign(seed=5, max_ps=0.02)
    extra[contrast_claims.INDEX] = 50.0
    frame = pd.concat([frame, extra], ignore_index=True)
    assert not heads.has_head(frame).iloc[-1]
    found = {claim: (verdict, why) for claim, verdict, why in contrast.verdicts(frame)}
    for claim in (NATURAL, *REDUNDANT):
        assert found[claim][0] == "disagrees", claim
        assert "over the seeds with a head (post hoc, issue 43): natural 5" in found[claim][1]


def test_the_redundancy_claims_disagree_where_natural_is_central_but_below_bi_induct():
    """Natural's index above 0 (agrees: central) but below both Bi-Induct arms' (disagrees)."""
    found = said(with_index(0.5, 1.0))
    assert found[NATURAL] == "agrees"
    assert [found[c] for c in REDUNDANT] == ["disagrees", "disagrees"]
