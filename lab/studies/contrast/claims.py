"""[B]'s claims in the contrast (``lab/studies/contrast``): the arm table and the verdicts.

The arm table (:func:`arm_table`) gives each number's mean over seeds with a Student-t 95%
interval over seeds beside what [B] reports for the arm (:data:`B_DIRECTION`). Each claim of
:func:`claims_of` is an estimate (the interval of a difference between arms, Welch's t, or of
one arm's mean, t) and a region declared here before the data; :func:`verdicts` judges it by
the rules every validation script shares (``ihprobe/dynamics/verdicts.py``), "pending: n of 5
seeds" while an arm it needs has fewer than 5 seeds run (a claim on heads: "inconclusive at this
scale" once all have run but fewer than 5 give a defined index or share). A claim about heads
(:data:`NEEDS_HEADS`) is judged only over the seeds that have an induction head by the post hoc
proxy of ``heads.py`` (issue 43), and is "inconclusive at this scale" when an arm it compares
has none. The issue-25 claims on the snippet scores (:func:`snippet_claims`) wait for
rescored seeds (:func:`scored`).

>>> frame = pd.DataFrame({"arm": ["natural", "natural", "forward"],
...                       "status": ["done", "pending", "done"], "max_ps": [0.4, 0.5, 0.1]})
>>> of(frame, "natural", "max_ps")
array([0.4])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ihprobe import METRIC_TABLE
from ihprobe.dynamics.verdicts import (
    INCONCLUSIVE,
    MIN_SEEDS,
    Pending,
    above,
    below,
    judge,
    judge_all,
    t_mean,
    welch,
)
from lab.studies.contrast import docs, heads
from lab.studies.contrast.docs import (
    values as scored,
)  # finite done values; none where never rescored

B_DIRECTION = {  # what [B] reports for each arm
    "natural": "central, load-bearing circuit (largest index); anti-induction ~0",
    "forward": "higher PS / forward induction than natural; distributed, redundant (lower index)",
    "backward": "anti-induction stays near 0 even though trained on; redundant circuit",
    "balanced": "distributed, redundant circuit (lower index than natural)",
}
SHOWN = {
    "max PS": "max_ps",
    "max forward induction, fixed L = 20 ([B]'s protocol)": "max_forward_induction_fixed",
    "max anti-induction": "max_anti_induction",
    "index global, layer-matched": "global-layer-matched:load_bearing_index",
    "index global, score-matched": "global-score-matched:load_bearing_index",
    "index per-layer [B]": "per-layer:load_bearing_index",
    "natural-text perplexity": "natural_perplexity",
}


def arm_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds [Student-t 95% over seeds], labelled with its seed count."""
    rows = []
    for arm, group in frame.groupby("arm", sort=False):
        done = group[group.status == "done"]
        row = {"arm": arm, "seeds done": ",".join(map(str, done.seed)) or "none"}
        for label, column in SHOWN.items():
            value = t_mean(done[column]).text() if len(done) else "pending"
            undefined = int((~np.isfinite(done[column].astype(float))).sum()) if len(done) else 0
            if undefined:  # NaN: one distinct random set (old rows: inf, draws harming alike)
                value += f"; {undefined} seed(s) undefined (one distinct random set), left out"
            row[label] = value
        row["[B] reports"] = B_DIRECTION[arm]
        row["train s/seed"] = f"{done.train_s.mean():.0f}" if len(done) else "-"
        rows.append(row)
    return pd.DataFrame(rows)


FORMED = METRIC_TABLE["prefix_matching"].threshold  # an attention score that counts as a head
NEEDS_HEADS = ("natural-only models", "redundant", "more central")  # claims on natural's heads
READS_INDEX = ("natural-only models", "redundant")  # claims that read INDEX itself
INDEX = "global-layer-matched:load_bearing_index"  # what the centrality claims read


def of(frame: pd.DataFrame, arm: str, column: str) -> np.ndarray:
    """An arm's done seeds' values of ``column``."""
    return frame[(frame.arm == arm) & (frame.status == "done")][column].to_numpy(float)


def exceeds(
    frame: pd.DataFrame, higher: str, lower: str, column: str, what: str, values=of
) -> tuple:
    """The claim that arm ``higher``'s mean of ``column`` exceeds arm ``lower``'s, in
    :func:`claims_of`' form: the two arms (natural-only, the arm every such claim is against,
    first), ``what``, Welch's t interval of ``higher`` - ``lower`` over the done seeds'
    ``values``, and the region above 0.

    >>> frame = pd.DataFrame({"arm": ["natural"] * 2 + ["forward"] * 2, "status": "done",
    ...                       "max_ps": [0.1, 0.2, 0.5, 0.6]})
    >>> needs, what, estimate, region = exceeds(frame, "forward", "natural", "max_ps", "PS")
    >>> needs, round(estimate().value, 2)
    (['natural', 'forward'], 0.4)
    """
    needs = [higher, lower] if higher == "natural" else [lower, higher]
    return (
        needs,
        what,
        lambda: welch(values(frame, higher, column), values(frame, lower, column)),
        above(0.0),
    )


def claims_of(frame: pd.DataFrame, recipe: str | None = None) -> dict:
    """Each claim of [B] -> (arms it needs, what is estimated, its estimate, the claim's region),
    the regions declared here before the data (a difference above 0; anti-induction below a
    formed head's score); ``recipe`` "docs" adds :func:`contrast_docs.claims`."""
    index = INDEX
    claims = {  # claim -> (arms it needs, what is estimated, its estimate, the claim's region)
        "natural-only models have a central, load-bearing induction circuit": (
            ["natural"],
            "natural's global layer-matched index (0 = random)",
            lambda: t_mean(of(frame, "natural", index)),
            above(0.0),
        ),
        "Bi-Induct forward raises forward induction above natural-only": exceeds(
            frame,
            "forward",
            "natural",
            "max_forward_induction_fixed",
            "max forward induction (fixed L = 20, [B]'s protocol), forward - natural",
        ),
        "anti-induction stays near zero when trained on backward snippets": (
            ["backward"],
            "backward's max anti-induction ([B]'s score, which no content match raises in a "
            "causal model)",
            lambda: t_mean(of(frame, "backward", "max_anti_induction")),
            below(FORMED),
        ),
    }
    claims.update(snippet_claims(frame))
    if recipe == "docs":
        claims.update(docs.claims(frame))
    for arm in ("forward", "balanced"):
        claims[f"Bi-Induct {arm}: a distributed, redundant circuit (index below natural's)"] = (
            exceeds(frame, "natural", arm, index, f"index, natural - {arm}")
        )
    for arm in ("forward", "backward", "balanced"):  # needs no heads: [B] finds it at every size
        claims[f"natural-only reaches a lower natural-text perplexity than Bi-Induct {arm}"] = (
            exceeds(frame, arm, "natural", "natural_perplexity", f"perplexity, {arm} - natural")
        )
    return claims


def verdicts(frame: pd.DataFrame, recipe: str | None = None) -> list[tuple[str, str, str]]:
    """(claim of [B], verdict, why) for each claim of :func:`claims_of`: the interval of a
    difference between arms (Welch's t) or of one arm's mean (t) against the claim's region; a
    claim of several parts (lists) judged part by part and joined by ``judge_all``; an arm has
    started when it has a done seed. A claim about heads (:data:`NEEDS_HEADS`) is judged over
    the seeds that have a head (``heads.with_heads``, post hoc, issue 43)."""
    headed = heads.with_heads(frame)
    on_heads = claims_of(headed, recipe)
    out = []
    for claim, (needs, what, estimate, region) in claims_of(frame, recipe).items():
        waiting = [arm for arm in needs if len(of(frame, arm, "max_ps")) == 0]
        if waiting:
            why = f"arm(s) {', '.join(waiting)}: no seed done"
            out.append((claim, Pending(0), why))
            continue
        on_index = any(word in claim for word in NEEDS_HEADS)  # these claims read an index
        # a claim on heads with every seed run: an index or share still missing is undefined
        final = on_index and all(len(of(frame, arm, "max_ps")) >= MIN_SEEDS for arm in needs)
        source = headed if on_index else frame
        if on_index:
            needs, what, estimate, region = on_heads[claim]
        headless = [arm for arm in needs if on_index and len(of(headed, arm, "max_ps")) == 0]
        if headless:
            verdict = Pending(0) if not final else INCONCLUSIVE
            why = (
                f"no seed of {' or '.join(headless)} has an induction head ({heads.LABEL}; "
                f"{headless[0]}'s max PS {t_mean(of(frame, headless[0], 'max_ps')).text('.2g')}): "
                "nothing to compare"
            )
            out.append((claim, verdict, why))
            continue
        if isinstance(region, list):
            parts = zip(estimate(), region, strict=True)
            verdict, why = judge_all([judge(e, r, final=final) for e, r in parts])
        else:
            verdict, why = judge(estimate(), region, final=final)
        why = f"{what}: {why}"
        undefined = sum(int((~np.isfinite(of(source, arm, INDEX))).sum()) for arm in needs)
        if any(word in claim for word in READS_INDEX) and undefined:
            why += (
                f"; {undefined} seed(s) without a defined index (the top set leaves one "
                "distinct random set), left out"
            )
        if on_index:
            why += f"; over the seeds with a head ({heads.LABEL}): {heads.seeds_used(frame, needs)}"
        if final and "defined values" in why:
            why += f"; every arm ran {MIN_SEEDS} seeds"
        out.append((claim, verdict, why))
    return out


def snippet_claims(frame: pd.DataFrame) -> dict:
    """What the varied-length and behavioural snippet scores (issue 25) say, in
    :func:`verdicts`' form, regions declared before the data: forward induction above
    natural-only where no single offset fits, and backward copying learned (the reversed copy
    predicted better than a shuffled copy of the same tokens)."""
    return {
        "(issue 25) Bi-Induct forward's forward induction is a content match: above "
        "natural-only on varied snippet lengths": exceeds(
            frame,
            "forward",
            "natural",
            "max_forward_induction_varied",
            "max forward induction (varied L 10-30), forward - natural",
            values=scored,
        ),
        "(issue 25) trained on backward snippets, the model copies backward": (
            ["backward"],
            "backward's loss on a shuffled copy minus on the reversed copy (nats)",
            lambda: t_mean(scored(frame, "backward", "backward_copy_vs_shuffled")),
            above(0.0),
        ),
    }
