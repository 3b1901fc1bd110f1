"""Per-head heatmaps of results: any head score of ``HeadScores``, layer (rows) x head (columns).

Colour scales are chosen from the metric, never from the data: a bounded score (an attention
weight, 0..1) always spans 0..1, so a head at chance stays dark; a signed score (copying,
correlations, logit attributions) gets a diverging scale centred on 0. ``zmin``/``zmax``
override either.

>>> head_heatmap(ihprobe.scan(model), "prefix_matching").write_html("ps.html")  # doctest: +SKIP
>>> color_range("copying")["colorscale"]
'RdBu'
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch
from jaxtyping import Float

from ihprobe.io.provenance import Provenance
from ihprobe.probes.scores import HeadScores

# head metrics whose values are attention weights: bounded to [0, 1]
BOUNDED = frozenset(
    {
        "prefix_matching",
        "prefix_matching_sd",
        "previous_token",
        "duplicate_token",
        "forward_induction_fixed",
        "forward_induction_varied",
        "anti_induction",
        "backward_duplicate",
        "backward_previous_token",
    }
)
# differences of two bounded scores (a composition score minus its random baseline): a
# diverging scale fixed at -1..1, so that noise around the baseline stays pale
UNIT_SIGNED = frozenset({"k_composition"})
# head metrics that can be negative: a diverging scale with 0 in the middle
SIGNED = frozenset(
    {
        "copying",
        "logit_attribution",
        "ps_la_correlation",
        "direct_logit_attribution",
        "change",
        "relative_change",
        "fv",  # a rise in the answer's probability; a head can lower it
    }
)
# plotly syncs an overlaying (right-hand) axis's ticks to the left axis's grid, so they read
# 4.141, 3.564, ...; these settings give such an axis its own round ticks
OWN_TICKS = {"tickmode": "auto", "showgrid": False}
TITLE_CHAR_PX = 9.5  # width of a character of plotly's 17 px title font, generously
DEFAULT_WIDTH = 700  # px: plotly's width (and a PNG's) when a figure sets none


def color_range(metric: str, zmin: float | None = None, zmax: float | None = None) -> dict:
    """Heatmap colour settings of ``metric``: 0..1 Viridis for bounded scores, RdBu -1..1 for
    differences of bounded scores, RdBu centred on 0 for other signed ones, the data's range
    otherwise; ``zmin``/``zmax`` override the range.

    Example:
        >>> color_range("prefix_matching")
        {'colorscale': 'Viridis', 'zmin': 0.0, 'zmax': 1.0}
        >>> color_range("k_composition")
        {'colorscale': 'RdBu', 'zmin': -1.0, 'zmax': 1.0}
    """
    if metric in UNIT_SIGNED:
        found = {"colorscale": "RdBu", "zmin": -1.0, "zmax": 1.0}
    elif metric in SIGNED:
        found = {"colorscale": "RdBu", "zmid": 0.0}
    elif metric in BOUNDED:
        found = {"colorscale": "Viridis", "zmin": 0.0, "zmax": 1.0}
    else:
        found = {"colorscale": "Viridis"}
    if zmin is not None or zmax is not None:
        found.pop("zmid", None)
        found.update({k: v for k, v in (("zmin", zmin), ("zmax", zmax)) if v is not None})
    return found


def colorbar_of(title: str) -> dict:
    """A colour bar titled along its right side, clear of the top tick label.

    >>> colorbar_of("prefix_matching")
    {'title': {'text': 'prefix_matching', 'side': 'right'}}
    """
    return {"title": {"text": title, "side": "right"}}


def wrap_title(title: str, width: int, margin: int = 80) -> str:
    """``title`` broken into lines (``<br>``) that fit a ``width``-pixel figure at plotly's
    title font (about ``TITLE_CHAR_PX`` per character), so that a PNG never cuts it off.

    Example:
        >>> wrap_title("ar_accuracy: change when each head alone is ablated", 420)
        'ar_accuracy: change when each head<br>alone is ablated'
    """
    per_line = max(10, int((width - margin) / TITLE_CHAR_PX))
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= per_line:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def fit_title(fig: go.Figure, title: str) -> go.Figure:
    """Set ``title`` wrapped to the figure's width (:func:`wrap_title`), with a top margin
    that holds every line.

    Example:
        >>> fig = fit_title(go.Figure(layout={"width": 420}), "word " * 12)
        >>> fig.layout.title.text.count("<br>"), fig.layout.margin.t
        (1, 100)
    """
    wrapped = wrap_title(title, fig.layout.width or DEFAULT_WIDTH)
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 100  # plotly's default
    lines = wrapped.count("<br>") + 1
    return fig.update_layout(title=wrapped, margin={"t": max(top, 30 + 24 * lines)})


def where(provenance: Provenance) -> str:
    """``model, revision, step N`` of a result, the parts that are known."""
    p = provenance
    step = None if p.step is None else f"step {p.step}"
    return ", ".join(str(x) for x in (p.model, p.revision, step) if x is not None)


def layer_head_heatmap(
    values: Float[torch.Tensor, "layer head"],
    label: str,
    title: str,
    colorscale: str | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """A plotly heatmap of ``[layer, head]`` values coloured as :func:`color_range` of
    ``label`` says (``colorscale`` overrides the scale); hover shows layer, head and value."""
    values = values.double().cpu()
    fig = go.Figure(_heatmap_trace(values, label, zmin, zmax))
    if colorscale is not None:
        fig.update_traces(colorscale=colorscale)
    fig.update_layout(
        title=wrap_title(title, DEFAULT_WIDTH),
        xaxis={"title": "head", "dtick": 1},
        yaxis={"title": "layer", "dtick": 1, "autorange": "reversed"},
        height=max(280, 160 + 40 * values.shape[0]),
    )
    return fig


def head_heatmap(
    scores: HeadScores,
    metric: str = "prefix_matching",
    zmin: float | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """A plotly heatmap of one head metric of ``scores``; hover shows the value.

    Example:
        >>> head_heatmap(scores, "prefix_matching").write_html("ps.html")  # doctest: +SKIP
    """
    values = scores.head_metric(metric)
    title = f"{metric} — {where(scores.provenance)}"
    return layer_head_heatmap(values, metric, title, zmin=zmin, zmax=zmax)


def checkpoint_slider(
    series: list[HeadScores],
    metric: str = "prefix_matching",
    zmin: float | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """One heatmap of ``metric`` per checkpoint of ``series``, chosen with a slider (the last
    checkpoint is shown first). Every frame shares one colour range, so checkpoints compare.

    Example:
        >>> checkpoint_slider([ihprobe.scan(m) for m in models])  # doctest: +SKIP
    """
    values = [s.head_metric(metric).double().cpu() for s in series]
    if zmin is None and zmax is None and metric not in BOUNDED | SIGNED | UNIT_SIGNED:
        zmin = min(float(v.min()) for v in values)
        zmax = max(float(v.max()) for v in values)
    labels = [_checkpoint_label(s.provenance, i) for i, s in enumerate(series)]
    fig = go.Figure(_heatmap_trace(values[-1], metric, zmin, zmax))
    steps = [
        {"label": label, "method": "restyle", "args": [{"z": [v.numpy()]}]}
        for v, label in zip(values, labels, strict=True)
    ]
    fig.update_layout(
        title=f"{metric} per head — {series[-1].provenance.model} (slider: checkpoint)",
        xaxis={"title": "head", "dtick": 1},
        yaxis={"title": "layer", "dtick": 1, "autorange": "reversed"},
        sliders=[
            {
                "active": len(steps) - 1,
                "steps": steps,
                "pad": {"t": 50},
                "currentvalue": {"prefix": "checkpoint: "},
            }
        ],
        height=max(340, 220 + 40 * values[-1].shape[0]),
    )
    return fit_title(fig, fig.layout.title.text)


def _checkpoint_label(provenance: Provenance, index: int) -> str:
    if provenance.step is not None:
        return f"step {provenance.step}"
    return str(provenance.revision or index)


def _heatmap_trace(values, label: str, zmin, zmax) -> go.Heatmap:
    n_layers, n_heads = values.shape
    return go.Heatmap(
        z=values.numpy(),
        x=list(range(n_heads)),
        y=list(range(n_layers)),
        colorbar=colorbar_of(label),
        hovertemplate="layer %{y}, head %{x}<br>" + label + " = %{z:.4f}<extra></extra>",
        **color_range(label, zmin, zmax),
    )
