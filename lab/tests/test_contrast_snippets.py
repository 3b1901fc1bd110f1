"""The contrast script's issue-25 claims (forward induction on varied lengths, backward copying)
flip with the data, wait for their seeds, and survive seeds that were never rescored."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.studies.contrast import run as contrast

VARIED = "(issue 25) Bi-Induct forward's forward induction is a content match: above "
VARIED += "natural-only on varied snippet lengths"
BACKWARD = "(issue 25) trained on backward snippets, the model copies backward"


def frame(backward_vs_shuffled: float, forward_varied: float, rescored=contrast.SEEDS):
    """Every arm and seed done on [B]'s scores; the issue-25 columns only on ``rescored`` seeds
    (NaN elsewhere, as in a CSV rescored part way)."""
    rows = []
    for arm in contrast.ARMS:
        for seed in contrast.SEEDS:
            jitter = 0.01 * seed
            scored = seed in rescored
            rows.append(
                {
                    "arm": arm,
                    "seed": seed,
                    "status": "done",
                    "max_ps": 0.02 + jitter,
                    "max_forward_induction_fixed": 0.5 + jitter,
                    "max_anti_induction": 0.04,
                    "global-layer-matched:load_bearing_index": jitter,
                    "natural_perplexity": 8.0,
                    "max_forward_induction_varied": (forward_varied if arm == "forward" else 0.04)
                    + jitter
                    if scored
                    else np.nan,
                    "backward_copy_vs_shuffled": (
                        backward_vs_shuffled if arm == "backward" else 0.0
                    )
                    + jitter
                    if scored
                    else np.nan,
                    "rescore_train_s": 1500.0 if scored else np.nan,
                }
            )
    return pd.DataFrame(rows)


def said(table: pd.DataFrame) -> dict[str, str]:
    return {claim: verdict for claim, verdict, _ in contrast.verdicts(table)}


def test_the_backward_copying_claim_flips_with_the_data():
    assert said(frame(3.0, 0.5))[BACKWARD] == "agrees"
    assert said(frame(-1.0, 0.5))[BACKWARD] == "disagrees"
    assert said(frame(-0.02, 0.5))[BACKWARD] == "inconclusive at this scale"  # -0.02..0.02


def test_the_varied_forward_claim_flips_with_the_data():
    """No seed here has a head (max PS 0.02): the claim needs none and is judged anyway."""
    assert said(frame(0.0, 0.8))[VARIED] == "agrees"  # a content match above natural-only's
    tie = frame(0.0, 0.04)  # as at chance as natural-only's: the interval straddles 0
    assert said(tie)[VARIED] == "inconclusive at this scale"
    below = tie.copy()  # natural-only's varied score well above forward's
    below.loc[below.arm == "natural", "max_forward_induction_varied"] += 0.5
    assert said(below)[VARIED] == "disagrees"


def test_claims_wait_for_rescored_seeds_and_the_table_names_them():
    part = frame(3.0, 0.8, rescored=(0, 1))
    assert said(part)[BACKWARD] == "pending: 2 of 5 seeds"
    assert said(frame(3.0, 0.8, rescored=()))[BACKWARD] == "pending: 0 of 5 seeds"
    table = contrast.snippet_table(part).set_index("arm")
    assert "2 seeds" in table.loc["backward", "shuffled minus reversed copy loss (nats)"]
    assert table.loc["backward", "seeds rescored (retraining wall time, one core)"] == (
        "0 (1500 s), 1 (1500 s)"
    )
    never = contrast.snippet_table(part.drop(columns=["backward_copy_vs_shuffled"]))
    assert (never["shuffled minus reversed copy loss (nats)"] == "not rescored yet").all()
