"""Post hoc (issue 43): which contrast seeds have an induction head, and the induction-loss rise.

The contrast's runs and checkpoints are gone, so ``ihprobe.causal.head_check`` (prefix matching
>= 0.1 at n = 10, 25 and 50; the repeated half >= 0.5 nats below the first; ablating the head
costs >= 0.1 nats) cannot be run on them. This module reads a documented proxy of that rule
from the columns the results CSVs hold, declared after the data (:data:`PROXY`): a seed *has a
head* when all three hold, and a column the CSV lacks counts as not passed.

- **signature:** ``max_ps`` (the top head's prefix matching on repeated random tokens, one
  length) at least head_check's 0.1;
- **at several lengths:** ``max_forward_induction_varied`` (forward induction on snippets whose
  length varies 10-30 per row, so no fixed offset fits) at least twice its chance (0.033);
- **used:** ``per-layer:relative_change`` (the relative rise of induction loss when [B]'s
  per-layer top heads are mean-ablated; the clean loss is not recorded, so 0.1 nats cannot be
  checked) at least 0.05.

Claims about heads are judged over the seeds that pass (:func:`with_heads`); the relative rise
of induction loss (the *induction-loss rise*) is reported beside the index by :func:`section`.
It is not [B]'s scale: [B] reports the relative drop in ICL *task* accuracy under top-2%
ablation (``lab/studies/contrast/task_drop.py``), and an induction-loss signature is the kind of
evidence [B] argues is not enough.

>>> rows = pd.DataFrame({"arm": ["natural"] * 2, "seed": [0, 1], "status": ["done"] * 2,
...     "max_ps": [0.34, 0.06], "max_forward_induction_varied": [0.42, 0.11],
...     "per-layer:relative_change": [0.13, -0.0004]})
>>> has_head(rows).tolist()
[True, False]
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ihprobe import METRIC_TABLE
from ihprobe.dynamics.verdicts import INCONCLUSIVE, MIN_SEEDS, Pending, above, judge, t_mean, welch
from ihprobe.jobs.grid import markdown

HEAD_CHECK_PS = 0.1  # ihprobe.head_check's prefix-matching threshold (RULE.ps; a test ties them)
VARIED_CHANCE = METRIC_TABLE["forward_induction_varied"].chance(512, 20)  # 1/30: no vocab term
RISE = "per-layer:relative_change"  # the induction-loss rise, per-layer top heads ablated
PROXY = {  # column -> (least value, what it stands for in head_check's rule)
    "max_ps": (HEAD_CHECK_PS, "max PS"),
    "max_forward_induction_varied": (2 * VARIED_CHANCE, "forward induction, varied L"),
    RISE: (0.05, "induction loss rise, top heads ablated"),
}
INDEX = "per-layer:load_bearing_index"
LABEL = "post hoc, issue 43"


def failed(row: pd.Series) -> list[str]:
    """The parts of :data:`PROXY` that ``row`` does not pass (a missing value fails)."""
    out = []
    for column, (least, what) in PROXY.items():
        value = float(row.get(column, np.nan))
        if not np.isfinite(value) or value < least:
            shown = "not recorded" if not np.isfinite(value) else f"{value:.3g}"
            out.append(f"{what} {shown} < {least:.3g}")
    return out


def has_head(frame: pd.DataFrame) -> pd.Series:
    """Per row: done and every part of :data:`PROXY` passed."""
    return frame.apply(lambda row: row.status == "done" and not failed(row), axis=1).astype(bool)


def with_heads(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the done seeds that have no head marked ``"no head"``, so that an arm's
    done values are its seeds with a head."""
    out = frame.copy()
    out.loc[(out.status == "done") & ~has_head(frame), "status"] = "no head"
    return out


def headed_seeds(frame: pd.DataFrame, arm: str) -> tuple[list[int], list[int]]:
    """(seeds with a head, done seeds without one) of ``arm``."""
    done = frame[(frame.arm == arm) & (frame.status == "done")]
    mask = has_head(done) if len(done) else pd.Series(dtype=bool)
    return list(done.seed[mask]), list(done.seed[~mask])


def _finite(frame: pd.DataFrame, arm: str, column: str) -> np.ndarray:
    if column not in frame:
        return np.array([])
    v = frame[(frame.arm == arm) & (frame.status == "done")][column].to_numpy(float)
    return v[np.isfinite(v)]


def seed_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per done seed: the proxy's columns, the per-layer index, and the check."""
    done = frame[frame.status == "done"]
    rows = []
    for _, row in done.iterrows():
        out = {"arm": row.arm, "seed": int(row.seed)}
        for column, (_, what) in PROXY.items():
            value = float(row.get(column, np.nan))
            out[what] = f"{value:.3g}" if np.isfinite(value) else "not recorded"
        index = float(row.get(INDEX, np.nan))
        out["[B]'s per-layer index"] = f"{index:.3g}" if np.isfinite(index) else "undefined"
        missed = failed(row)
        out["has a head (proxy)"] = "yes" if not missed else "no: " + "; ".join(missed)
        rows.append(out)
    return pd.DataFrame(rows)


def arm_rows(frame: pd.DataFrame, arms) -> pd.DataFrame:
    """Per arm: seeds with a head, the relative rise over all seeds and over seeds with a
    head, and [B]'s per-layer index over seeds with a head (mean [t 95%])."""
    headed = with_heads(frame)
    rows = []
    for arm in arms:
        yes, no = headed_seeds(frame, arm)
        if not yes and not no:
            continue
        rise, rise_h = _finite(frame, arm, RISE), _finite(headed, arm, RISE)
        index_h = _finite(headed, arm, INDEX)
        rows.append(
            {
                "arm": arm,
                "seeds with a head": ",".join(map(str, yes)) or "none",
                "without": ",".join(map(str, no)) or "none",
                "induction loss rise, top heads ablated, all seeds": t_mean(rise).text(),
                "the same, seeds with a head": t_mean(rise_h).text() if len(rise_h) else "none",
                "[B]'s per-layer index, seeds with a head": (
                    t_mean(index_h).text() if len(index_h) else "none"
                ),
            }
        )
    return pd.DataFrame(rows)


def seeds_used(frame: pd.DataFrame, arms) -> str:
    """Which seeds a claim about heads uses in each of ``arms``, and which it leaves out.

    >>> frame = pd.DataFrame({"arm": ["natural"] * 2, "seed": [0, 1], "status": ["done"] * 2,
    ...     "max_ps": [0.34, 0.06], "max_forward_induction_varied": [0.42, 0.11],
    ...     "per-layer:relative_change": [0.13, -0.0004]})
    >>> seeds_used(frame, ["natural"])
    'natural 1 of 2 (seed 0); left out, no head: natural seed 1'
    >>> seeds_used(frame.head(1), ["natural"])
    'natural 1 of 1 (seed 0); none left out'
    """

    def listed(seeds):
        return f"seed{'s' * (len(seeds) != 1)} {', '.join(map(str, seeds))}" if seeds else "none"

    used, out = [], []
    for arm in arms:
        yes, no = headed_seeds(frame, arm)
        used.append(f"{arm} {len(yes)} of {len(yes) + len(no)} ({listed(yes)})")
        out += [f"{arm} {listed(no)}"] if no else []
    left = f"left out, no head: {'; '.join(out)}" if out else "none left out"
    return f"{' and '.join(used)}; {left}"


def rise_verdicts(frame: pd.DataFrame, arms) -> list[tuple[str, str, str, str]]:
    """(claim, seeds, verdict, why): natural - arm of the induction-loss rise above 0 (Welch t),
    judged only over the seeds with a head (a seed without one has no induction heads to
    ablate), the seeds used and left out named; a claim on heads needs every arm run and 5
    seeds with a head in each arm it compares."""
    headed = with_heads(frame)
    ran = {a: int(((frame.arm == a) & (frame.status == "done")).sum()) for a in arms}
    out = []
    for arm in [a for a in arms if a != "natural"]:
        final = min(ran["natural"], ran[arm]) >= MIN_SEEDS  # every seed run: missing = no head
        claim = f"natural-only's top heads raise induction loss more than Bi-Induct {arm}'s"
        seeds = seeds_used(frame, ("natural", arm))
        estimate = welch(_finite(headed, "natural", RISE), _finite(headed, arm, RISE))
        if estimate.seeds == 0:
            verdict = INCONCLUSIVE if final else Pending(0)
            out.append((claim, seeds, verdict, "no seed with a head in both arms"))
            continue
        verdict, why = judge(estimate, above(0.0), final=final)
        out.append((claim, seeds, verdict, f"induction-loss rise, natural - {arm}: {why}"))
    return out


def top_share(n_layers: int, n_heads: int, top: float = 0.02) -> str:
    """What [B]'s "top 2% of heads", taken per layer, is at this model's shape: ``ablate``'s
    rule, ``max(1, ceil(top * heads))`` a layer (a test ties the two).

    >>> top_share(2, 4).split(" here: ")[1]
    "2 of 8 heads, 25% of the model's heads, not 2%."
    """
    k = max(1, math.ceil(round(top * n_heads, 9)))  # ihprobe's heads_per_layer
    return (
        f'[B]\'s "top {top:.0%}" taken per layer (at least one head a layer) '
        f"is {k} of {n_heads} heads in each of the {n_layers} layers here: {k * n_layers} of "
        f"{n_heads * n_layers} heads, {100 * k / n_heads:.3g}% of the model's heads, not {top:.0%}."
    )


def mixed_note(frame: pd.DataFrame, arms) -> list[str]:
    """One line per arm whose seeds mix head and no head: the intervals above mix them."""
    out = []
    for arm in arms:
        yes, no = headed_seeds(frame, arm)
        if yes and no:
            out.append(
                f"- {arm}: a head in seed(s) {', '.join(map(str, yes))}, none in "
                f"{', '.join(map(str, no))}: its intervals in the tables above mix the two, so "
                "they describe neither."
            )
    return out or ["- no arm mixes seeds with and without a head."]


def section(frame: pd.DataFrame, arms, shape: tuple[int, int]) -> list[str]:
    """The results file's post hoc section (issue 43); ``shape`` is the models' (layers, heads
    per layer), which says what [B]'s top 2% is here (:func:`top_share`)."""
    parts = "; ".join(f"`{c}` >= {least:.3g}" for c, (least, _) in PROXY.items())
    return [
        f"## Heads per seed and the induction-loss rise ({LABEL})",
        "",
        "Added after the data, from the recorded columns only (the runs' checkpoints are gone, so",
        "`ihprobe.causal.head_check` cannot run on them). A seed has an induction head by a proxy",
        f"of head_check's rule when all of these hold: {parts} (`lab/studies/contrast/heads.py`).",
        "The claims about heads above (load-bearing index, centrality share, redundancy) are",
        "judged only over the seeds that pass; a claim needs 5 seeds with a head in every arm",
        "it compares.",
        "",
        *markdown(seed_table(frame)),
        "",
        "Intervals over seeds that mix head and no head:",
        "",
        *mixed_note(frame, arms),
        "",
        "The induction-loss rise: the relative rise of induction loss when [B]'s per-layer top",
        "heads are mean-ablated, mean [t 95%] over seeds. It keeps its own name: it is not [B]'s",
        "scale, which is the relative drop in ICL task accuracy under the same ablation (below).",
        top_share(*shape),
        "",
        *markdown(arm_rows(frame, arms)),
        "",
        "Natural - Bi-Induct of that rise above 0 (Welch t), judged by the shared rules only over",
        "the seeds with a head (a seed without one has no induction heads to ablate); each row",
        "names the seeds it uses and those it leaves out.",
        f"The proxy itself asks for a rise of at least {PROXY[RISE][0]:g}, so over seeds with a",
        "head this rise (and the load-bearing index, read from the same ablation) is selected on",
        "its own value: seeds with a small rise are left out of every arm, which pulls each arm's",
        "mean up; read these verdicts as conditional on the selection.",
        "",
        *markdown(
            pd.DataFrame(rise_verdicts(frame, arms), columns=["claim", "seeds used", "here", "why"])
        ),
        "",
    ]
