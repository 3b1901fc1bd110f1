"""What the contrast measures on a finished arm's model: how load-bearing its induction heads
are under three ablation protocols, and its natural-text loss.
"""

from __future__ import annotations

import ihprobe
from lab.studies.contrast import docs
from lab.studies.contrast.cells import METRICS


def ablations(model, scores, seed: int, random: int, text=None, tasks=False) -> dict[str, dict]:
    """Index and change of induction loss under the three protocols; natural loss on ``text``
    (default the embedded corpus); with ``tasks`` the per-layer ablation's task scores too."""
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
        "per-layer": ihprobe.ablate(model, scope="layer", **per_layer),
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
        out.update(docs.task_columns(results["per-layer"].summary()))
    return out
