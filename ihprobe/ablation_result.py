"""``AblationResult``: clean, top-set and random-set values of every metric, and their statistics.

>>> result = ihprobe.ablate(model)                                              # doctest: +SKIP
>>> result.summary()[["metric", "top_drop", "random_drop_mean", "p_value"]]     # doctest: +SKIP
>>> result.to_frame().head()                                                    # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float

from ihprobe.probes.engine import METRIC_TABLE
from ihprobe.scores import COLUMNS, CarriesProvenance, Provenance, with_provenance


@dataclass
class AblationResult(CarriesProvenance):
    """Clean, top-ablated and random-ablated values of every metric, and the head sets used.

    ``values[metric]`` is a tensor ``[2 + R]``: clean, top set, then the ``R`` random draws.
    Drops are SPEC's ``(ablated - clean) / clean``; the p-value and the ratio compare *harm*
    (the change oriented so that positive is worse, ``METRICS``), which the clean value scales
    away, so they are the same whether computed on absolute or relative changes.
    """

    provenance: Provenance
    by: str
    scores: Float[torch.Tensor, "layer head"]
    top_heads: list[tuple[int, int]]
    random_heads: list[list[tuple[int, int]]]
    values: dict[str, Float[torch.Tensor, " group"]]
    settings: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return list(self.values)

    def drops(self, metric: str) -> Float[torch.Tensor, " group"]:
        """Relative change ``(ablated - clean) / clean`` of each group (the clean one is 0)."""
        v = self.values[metric].double()
        return (v - v[0]) / v[0] if v[0] != 0 else torch.full_like(v, math.nan)

    def summary(self) -> pd.DataFrame:
        """One row per metric: clean, top, random statistics, p-value and ratio top/random."""
        return pd.DataFrame([_statistics(m, self.values[m]) for m in self.values])

    def to_frame(self) -> pd.DataFrame:
        """The long table ``model, revision, step, tokens, layer, head, metric, value``.

        Model-level rows (layer and head empty) hold ``{metric}.{statistic}`` for every
        column of :meth:`summary`; head rows hold the score ``by``, ``top_set`` (1 for heads
        in the top set) and ``random_set`` (how many random draws picked the head).
        """
        rows = []
        for stats in self.summary().to_dict("records"):
            metric = stats.pop("metric")
            rows += [(None, None, f"{metric}.{k}", float(v)) for k, v in stats.items()]
        picked = torch.zeros_like(self.scores)
        for draw in self.random_heads:
            for layer, head in draw:
                picked[layer, head] += 1
        top = set(self.top_heads)
        n_layers, n_heads = self.scores.shape
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append((layer, head, self.by, float(self.scores[layer, head])))
                rows.append((layer, head, "top_set", float((layer, head) in top)))
                rows.append((layer, head, "random_set", float(picked[layer, head])))
        return with_provenance(pd.DataFrame(rows, columns=list(COLUMNS[4:])), self.provenance)


def _statistics(metric: str, values: torch.Tensor) -> dict:
    v = values.double().numpy()
    clean, top, random = v[0], v[1], v[2:]
    rel = (v - clean) / clean if clean != 0 else np.full_like(v, np.nan)
    harm = METRIC_TABLE[metric.split(":")[0]].harm_sign * (v - clean)
    random_harm = harm[2:]
    mean_harm = random_harm.mean()
    return {
        "metric": metric,
        "clean": clean,
        "top": top,
        "random_mean": random.mean(),
        "top_drop": rel[1],
        "random_drop_mean": rel[2:].mean(),
        "random_drop_sd": rel[2:].std(ddof=1) if len(random) > 1 else math.nan,
        "random_drop_lo": np.quantile(rel[2:], 0.025),
        "random_drop_hi": np.quantile(rel[2:], 0.975),
        "p_value": float((random_harm >= harm[1]).mean()),
        "ratio": harm[1] / mean_harm if mean_harm != 0 else math.nan,
    }
