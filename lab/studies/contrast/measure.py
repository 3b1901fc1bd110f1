"""What the contrast measures on a finished arm's model: how load-bearing its induction heads
are under three ablation protocols, and its natural-text loss; and the draws behind each row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

import ihprobe
from lab.studies.contrast import docs, task_drop
from lab.studies.contrast.cells import METRICS


def ablations(model, scores, seed: int, random: int, text=None, tasks=False) -> dict[str, dict]:
    """Index and change of induction loss under the three protocols; natural loss on ``text``
    (default the embedded corpus); with ``tasks`` the per-layer ablation's task scores too, with
    [B]'s quantity per built-in task (``task_drop.columns``)."""
    common = {
        "metrics": METRICS,
        "random": random,
        "seed": seed,
        "text": text,
        "scores": scores.head_metric("prefix_matching"),
    }
    k = model.cfg.n_layers  # the global set as large as the per-layer one
    per_layer = {**common, "metrics": (*METRICS, *docs.TASK_METRICS)} if tasks else common
    results = {
        "global-layer-matched": ihprobe.ablate(model, scope="global", top=k, **common),
        "global-score-matched": ihprobe.ablate(
            model, scope="global", top=k, baseline="score-matched", **common
        ),
        "per-layer": ihprobe.ablate(model, scope="layer", top=0.02, **per_layer),
    }
    out = {}
    for name, result in results.items():
        row = result.summary().set_index("metric").loc["induction_loss"]
        for key in (
            "load_bearing_index",
            "load_bearing_lo",
            "load_bearing_hi",
            "relative_change",
            "random_relative_change_mean",
            "p_value",
        ):
            out[f"{name}:{key}"] = float(row[key])
    natural = results["per-layer"].summary().set_index("metric").loc["natural_loss"]
    out["natural_loss"] = float(natural["clean"])
    if tasks:
        out.update(task_drop.columns(results["per-layer"].summary()))
    return out


def draws(frame: pd.DataFrame, out_md: Path, now: int | None) -> str:
    """The random draws behind the rows of ``frame``, from each row's own record
    (``random_draws``); a row from before that column by the count the results file states; a
    row measured in this run by ``now``. Several counts are each named.

    >>> draws(pd.DataFrame({"random_draws": [20.0, None]}), Path("no/such.md"), None)
    '20'
    """
    recorded = frame["random_draws"] if "random_draws" in frame else pd.Series(dtype=float)
    found = {int(v) for v in recorded.dropna()}
    if recorded.isna().any() or not len(recorded):
        text = out_md.read_text() if out_md.is_file() else ""
        stated = re.search(r"(\d+) random draws", text)
        found |= {int(stated.group(1))} if stated else ({now} if now is not None else set())
    return " or ".join(map(str, sorted(found))) + (" (per row: the CSV)" if len(found) > 1 else "")
