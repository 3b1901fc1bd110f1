"""Per-head heatmaps of results: any head score of ``HeadScores``, layer (rows) x head (columns).

>>> head_heatmap(ihprobe.scan(model), "prefix_matching").write_html("ps.html")  # doctest: +SKIP
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch
from jaxtyping import Float

from ihprobe.scores import HeadScores, Provenance


def where(provenance: Provenance) -> str:
    """``model, revision, step N`` of a result, the parts that are known."""
    p = provenance
    step = None if p.step is None else f"step {p.step}"
    return ", ".join(str(x) for x in (p.model, p.revision, step) if x is not None)


def layer_head_heatmap(
    values: Float[torch.Tensor, "layer head"], label: str, title: str, colorscale="Viridis"
) -> go.Figure:
    """A plotly heatmap of ``[layer, head]`` values; hover shows layer, head and value."""
    values = values.double().cpu()
    n_layers, n_heads = values.shape
    fig = go.Figure(
        go.Heatmap(
            z=values.numpy(),
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            colorscale=colorscale,
            colorbar={"title": label},
            hovertemplate="layer %{y}, head %{x}<br>" + label + " = %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"title": "head", "dtick": 1},
        yaxis={"title": "layer", "dtick": 1, "autorange": "reversed"},
    )
    return fig


def head_heatmap(scores: HeadScores, metric: str = "prefix_matching") -> go.Figure:
    """A plotly heatmap of one head metric of ``scores``; hover shows the value.

    Example:
        >>> head_heatmap(scores, "prefix_matching").write_html("ps.html")  # doctest: +SKIP
    """
    values = scores.head_metric(metric)
    return layer_head_heatmap(values, metric, f"{metric} — {where(scores.provenance)}")
