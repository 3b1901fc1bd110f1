"""The contrast's snippet scores (issue 25; ``lab/studies/contrast``): measured, rescored
and shown.

Per seed, on the final checkpoint (:func:`snippet_columns`; max over heads for a head score):
[B]'s fixed-length protocol (forward induction, anti-induction, L = 20), and the varied-length
scores that tell a content mechanism from a fixed offset and measure backward copying by what
the model predicts on a reversed copy (:data:`SNIPPET_METRICS`, docs/science.md); the
``--recipe docs`` arms add fixed-length forward induction at :data:`OTHER_LENGTHS`.
:func:`rescore` (``--rescore``) adds these columns to finished seeds' CSV rows, and
:func:`snippet_note` and :func:`snippet_table` are the results file's section on them (the
claims they bear on are ``contrast_claims.snippet_claims``).

>>> frame = pd.DataFrame({"arm": ["backward"], "seed": [0], "status": ["done"],
...                       "rescore_train_s": [1500.0], "backward_copy_vs_shuffled": [0.4]})
>>> snippet_table(frame).iloc[0, :2].tolist()
['backward', '0 (1500 s)']
"""

from __future__ import annotations

import math
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

import ihprobe
from ihprobe import METRIC_TABLE, checkpoints
from ihprobe.dynamics.verdicts import t_mean
from lab.studies.atomic import write_csv
from lab.studies.contrast.claims import scored

# the snippet scores of each seed (max over heads for a head score): [B]'s fixed-length
# protocol (forward induction, anti-induction) and the varied-length ones that tell a content
# mechanism from a fixed offset and measure backward copying by what the model predicts
SNIPPET_METRICS = (
    "forward_induction_fixed",
    "anti_induction",
    "forward_induction_varied",
    "backward_duplicate",
    "backward_previous_token",
    "backward_copy_loss",
    "backward_copy_accuracy",
    "backward_copy_vs_first_half",
    "backward_copy_vs_shuffled",
)


def snippet_columns(scores) -> dict[str, float]:
    """``max_<score>`` of every head snippet score and the model-level ones as they are."""
    head = {
        f"max_{m}": float(scores.head_metric(m).max()) for m in SNIPPET_METRICS if m in scores.head
    }
    return {**head, **{m: float(v) for m, v in scores.model.items() if m in SNIPPET_METRICS}}


OTHER_LENGTHS = (15, 25)  # a head that looks 20 back scores at L = 20 only; induction at all


def other_lengths(model, seed: int) -> dict[str, float]:
    """Max fixed-length forward induction at snippet lengths other than [B]'s 20."""
    return {
        f"max_forward_induction_fixed_L{n}": float(
            ihprobe.scan(model, ["forward_induction_fixed"], seed=seed, snippet_length=n)
            .head_metric("forward_induction_fixed")
            .max()
        )
        for n in OTHER_LENGTHS
    }


def rescore(arm: str, seed: int, trained: tuple[Path, float, str], csv: Path) -> dict:
    """The snippet scores of one arm's seed, merged into its row of the results CSV ``csv``.

    ``trained`` is the seed's (run dir, training seconds now, how) from the contrast's
    ``arm_run``: the run's final checkpoint is scored where its folder still holds it; otherwise
    the run was trained again first (the same config and seed: training is deterministic on one
    CPU thread). ``reproduced`` says whether the retrained model gives the CSV's max PS and
    anti-induction to 1e-6, so a row never mixes numbers of two different models unnoticed.
    """
    run, seconds, how = trained
    started = time.perf_counter()
    model = ihprobe.load(checkpoints(run)[-1].source)
    scores = ihprobe.scan(model, ["prefix_matching", *SNIPPET_METRICS], seed=seed)
    new = {**snippet_columns(scores), **other_lengths(model, seed)}
    new["rescore_probe_s"] = time.perf_counter() - started
    if how != "reused":  # a second rescore of the same run keeps the first one's training time
        new.update(rescore_how=how, rescore_train_s=seconds)
    table = pd.read_csv(csv)
    at = (table.arm == arm) & (table.seed == seed)
    if at.sum() == 1:
        old = table[at].iloc[0]
        new["reproduced"] = bool(
            abs(old.max_ps - float(scores.head_metric("prefix_matching").max())) < 1e-6
            and abs(old.max_anti_induction - new["max_anti_induction"]) < 1e-6
        )
        for column, value in new.items():
            table.loc[at, column] = value
    else:  # a seed the CSV does not hold yet: its full measurement comes from run_arm
        new["reproduced"] = False
    write_csv(csv, table)
    print(f"{arm} seed {seed}: rescored ({how}), {new}", flush=True)
    return new


SNIPPET_SHOWN = {  # issue 25; [B]'s fixed-length scores are in the arm table
    "max forward induction, varied L 10-30": "max_forward_induction_varied",
    "max forward induction, fixed L = 15": "max_forward_induction_fixed_L15",
    "max forward induction, fixed L = 25": "max_forward_induction_fixed_L25",
    "max backward duplicate (varied)": "max_backward_duplicate",
    "max backward previous-token (varied)": "max_backward_previous_token",
    "backward copy accuracy (varied)": "backward_copy_accuracy",
    "backward copy loss (nats)": "backward_copy_loss",
    "shuffled minus reversed copy loss (nats)": "backward_copy_vs_shuffled",
    "first half minus reversed copy loss (nats)": "backward_copy_vs_first_half",
}


def snippet_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The varied-length and behavioural snippet scores: mean [t 95%] over the seeds rescored
    so far (each cell names its seed count), one row per arm of ``frame`` in its order (as the
    arm table)."""
    rows = []
    for arm in frame.arm.unique():
        wall = frame.get("rescore_train_s", pd.Series(np.nan, index=frame.index))
        done = (frame.arm == arm) & wall.notna()
        walls = zip(frame.seed[done], wall[done], strict=True)
        retrained = ", ".join(f"{seed} ({seconds:.0f} s)" for seed, seconds in walls) or "none"
        row = {"arm": arm, "seeds rescored (retraining wall time, one core)": retrained}
        for label, column in SNIPPET_SHOWN.items():
            values = scored(frame, arm, column)
            row[label] = t_mean(values).text() if len(values) else "not rescored yet"
        rows.append(row)
    return pd.DataFrame(rows)


def snippet_note(vocab: int, heads: int) -> list[str]:
    """What the snippet table shows, with chance for a ``vocab``-id model of ``heads`` heads."""
    chance = {
        m: METRIC_TABLE[m].chance(vocab, 20)
        for m in ("forward_induction_varied", "backward_duplicate", "backward_previous_token")
    }
    text = (
        "[B]'s forward induction and anti-induction above use snippets of one length (L = 20), "
        "so a head that looks 20 tokens back scores 1 on forward induction, and [B]'s "
        "anti-induction reads a key that no causal head can find by content (docs/science.md). "
        "Below: forward induction on snippets whose length L varies 10-30 per row, and backward "
        "copying measured by what the model predicts on the reversed copy (accuracy, loss, and "
        "the loss of a shuffled copy and of the first half minus it), with the attention of the "
        "circuit that does it (the copy's s_k to its earlier occurrence; the previous-token head "
        "there). A run whose folder is gone is retrained (same config and seed) and rescored "
        "with `--rescore`; `reproduced` in the CSV says whether it gave the CSV's max PS and "
        "anti-induction again. Chance (a head attending uniformly; a max over "
        f"{heads} heads sits a little above it): forward induction "
        f"{chance['forward_induction_varied']:.3f}, backward duplicate "
        f"{chance['backward_duplicate']:.3f}, previous-token "
        f"{chance['backward_previous_token']:.2f}; copy accuracy 1/{vocab}, copy loss ln {vocab} "
        f"= {math.log(vocab):.1f} nats for a uniform guess (a model of natural text is "
        "confidently wrong on random tokens, so its losses run higher), the two differences 0."
    )
    return [
        "## Snippet scores that tell mechanisms apart (issue 25)",
        "",
        *textwrap.wrap(text, 95, break_on_hyphens=False),
    ]
