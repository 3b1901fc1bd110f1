"""Figures of emergence: trajectories, per-head strips, the law's fit, the frontier map.

>>> table = ihprobe.trajectory("runs/demo", ["prefix_matching", "ar_accuracy"])  # doctest: +SKIP
>>> trajectory_figure(table, point=ihprobe.emergence(table),                     # doctest: +SKIP
...                   prediction=ihprobe.predict_emergence(32, 64))
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.curves import curve
from ihprobe.dynamics.law import get_law
from ihprobe.figures.heads import OWN_TICKS, color_range, colorbar_of

# (metric, reduce, label) drawn by trajectory_figure when the table holds them
TRAJECTORY_LINES = (
    ("prefix_matching", "max", "max prefix matching"),
    ("fv", "max", "max FV score"),  # when asked for (ihprobe emergence --metric fv)
    ("ar_accuracy", "max", "AR accuracy"),
)


def trajectory_figure(
    table: pd.DataFrame,
    point: EmergencePoint | None = None,
    prediction=None,
    losses: pd.DataFrame | None = None,
    title: str | None = None,
) -> go.Figure:
    """Max PS and AR accuracy (left axis) and training loss (right axis) against tokens, log x.

    The detected emergence point is a solid line with the bracketing checkpoints shaded, the
    law's :class:`~ihprobe.dynamics.law.Prediction` a dashed line; checkpoints whose weights
    repeat an earlier one's (``duplicate_of``) are red crosses (left out of the emergence fit).

    Args:
        table: a trajectory table of one run.
        point: :func:`ihprobe.emergence` of it.
        prediction: :func:`ihprobe.predict_emergence` for the run's B and C.
        losses: ``tokens, loss`` rows, e.g. :func:`ihprobe.io.runs.losses`.

    (Over 60 lines only by its example.)

    Example:
        >>> import pandas as pd
        >>> t = pd.DataFrame({"step": [0, 1, 2], "tokens": [0, 64, 128],
        ...     "metric": "prefix_matching", "value": [0.02, 0.3, 0.8]})
        >>> type(trajectory_figure(t)).__name__
        'Figure'
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    _score_lines(fig, table)
    if losses is not None and len(losses):
        fig.add_scatter(
            x=losses.tokens,
            y=losses.loss,
            name="training loss",
            mode="lines",
            line={"color": "grey", "width": 1},
            secondary_y=True,
        )
        fig.update_yaxes(title_text="loss", secondary_y=True, **OWN_TICKS)
    placed = point is not None and point.transition  # a point without a transition has no x
    law_right = placed and prediction is not None and prediction.tokens > point.tokens
    if placed:
        emergence_band(fig, point.tokens_low, point.tokens_high, "x")
        at = f"{'>=' if point.at_edge else '~'}{point.updates:,.0f}"  # >=: a lower bound
        labelled_vline(
            fig,
            point.tokens,
            f"emergence {at} updates",
            {"color": "darkorange"},
            y=1.0,
            left=law_right,
        )
    if prediction is not None:
        _law_mark(fig, prediction, table, left=placed and not law_right)
    fig.update_xaxes(type="log", title_text="training tokens")
    fig.update_yaxes(title_text="score", secondary_y=False)
    heading = title or (f"{point.model}" if point is not None and point.model else "trajectory")
    if point is not None and not point.transition:
        heading += f" — no transition: {point.reason}"
    fig.update_layout(
        title=heading,
        hovermode="x unified",
        template="plotly_white",
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def _score_lines(fig: go.Figure, table: pd.DataFrame) -> None:
    """One line per score of :data:`TRAJECTORY_LINES` the table holds; checkpoints whose weights
    repeat an earlier one's as red crosses."""
    for metric, reduce, label in TRAJECTORY_LINES:
        if metric in set(table["metric"]):
            c = curve(table, metric, reduce)
            fig.add_scatter(x=c.tokens, y=c.value, name=label, mode="lines+markers")
            copies = c[c["duplicate"]]
            if len(copies):
                fig.add_scatter(
                    x=copies.tokens,
                    y=copies.value,
                    mode="markers",
                    name=f"{label}: same weights as an earlier checkpoint",
                    marker={"symbol": "x", "size": 11, "color": "red"},
                )


OFF_AXIS = 10  # a prediction this many times past the last checkpoint is named, not drawn


def _law_mark(fig: go.Figure, prediction, table: pd.DataFrame, left: bool) -> None:
    """The law's prediction: a dashed line, or, far past the run's last checkpoint, a note above
    the plot's right edge (a line there would stretch the log axis far beyond the data)."""
    last = float(table["tokens"].max()) if table["tokens"].notna().any() else None
    said = f"{law_label(prediction.law.name)}: {prediction.updates:,.0f} updates"
    if last and prediction.tokens > OFF_AXIS * last:
        fig.add_annotation(
            x=1,
            y=1.0,
            xref="paper",
            yref="paper",
            xanchor="right",
            yanchor="bottom",  # above the plot: clear of the curves and of the axis' tick labels
            text=f"{said} ({prediction.tokens:,.3g} tokens), {prediction.tokens / last:,.0f}x "
            "past this run's end, off this axis →",
            showarrow=False,
            bgcolor="rgba(255,255,255,0.8)",
        )
    else:
        labelled_vline(
            fig, prediction.tokens, said, {"color": "black", "dash": "dash"}, y=0.08, left=left
        )


def law_label(name: str) -> str:
    """How a figure names a law: the published one is not a fit to this run.

    >>> law_label("fitted"), law_label("refit")
    ("[A]'s published law", 'the law refit on your runs')
    """
    return {
        "fitted": "[A]'s published law",
        "sqrt": "[A]'s sqrt law",
        "refit": "the law refit on your runs",
    }.get(name, f"law ({name})")


def emergence_band(fig: go.Figure, low: float, high: float, axis: str) -> None:
    """The checkpoints that bracket an emergence point, as an orange band across the plot:
    vertical on a token axis (``axis="x"``), horizontal on an update axis (``"y"``)."""
    band = {"fillcolor": "orange", "opacity": 0.15, "line_width": 0}
    if axis == "x":
        fig.add_vrect(x0=low, x1=high, **band)
    else:
        fig.add_hrect(y0=low, y1=high, **band)


def labelled_vline(
    fig: go.Figure, x: float, text: str, line: dict, y: float = 1.0, left: bool = False
) -> None:
    """A vertical line at data position ``x`` of a log-x figure, with ``text`` beside it: on
    its right, or on its ``left`` (so that two labelled lines face away from each other).

    Plotly places shapes on a log axis by data value but annotations by log10 of it
    (``add_vline(annotation_text=...)`` puts the label off the plot), so the label is added
    separately at ``log10(x)``.
    """
    fig.add_vline(x=x, line=line)
    fig.add_annotation(
        x=math.log10(x),
        y=y,
        xref="x",
        yref="paper",
        text=text,
        showarrow=False,
        xanchor="right" if left else "left",
        yanchor="top",
        font={"color": line.get("color", "black")},
        bgcolor="rgba(255,255,255,0.8)",
    )


def head_strip_figure(table: pd.DataFrame, metric: str = "prefix_matching") -> go.Figure:
    """Every head's ``metric`` over training: heads as rows, checkpoints as columns.

    Example:
        >>> import pandas as pd
        >>> t = pd.DataFrame({"step": [0, 1, 2], "tokens": [0, 64, 128],
        ...     "metric": "prefix_matching", "layer": 1, "head": 0, "value": [0.02, 0.3, 0.8]})
        >>> type(head_strip_figure(t)).__name__
        'Figure'
    """
    rows = table[(table["metric"] == metric) & table["layer"].notna()]
    grid = rows.pivot_table(index=["layer", "head"], columns="tokens", values="value")
    labels = [f"L{int(layer)}H{int(head)}" for layer, head in grid.index]
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=[f"{int(t):,}" for t in grid.columns],
            y=labels,
            colorbar=colorbar_of(metric),
            **color_range(metric),
            hovertemplate="%{y} at %{x} tokens: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{metric} per head over training",
        xaxis_title="training tokens (checkpoint)",
        yaxis={"autorange": "reversed"},
        template="plotly_white",
    )
    return fig


def law_figure(fit, reference=None) -> go.Figure:
    """Measured against predicted emergence updates, log-log, for a
    :class:`~ihprobe.dynamics.law.LawFit`;
    ``reference`` (a law name or :class:`~ihprobe.dynamics.law.Law`) adds its predictions too."""
    frame = fit.to_frame()
    text = [f"B={int(b)} C={int(c)}" for b, c in zip(frame.batch_size, frame.context, strict=True)]
    fig = go.Figure()
    fig.add_scatter(
        x=frame.predicted,
        y=frame.updates,
        mode="markers+text",
        text=text,
        textposition="top center",
        name=f"refit: b={fit.b:.2f}, c={fit.c:.2f}, r={fit.r:.2f}",
    )
    if reference is not None:
        law = get_law(reference)
        ref = [law.updates(b, c) for b, c in zip(frame.batch_size, frame.context, strict=True)]
        fig.add_scatter(x=ref, y=frame.updates, mode="markers", name=f"law {law.name}")
    span = np.array([frame[["predicted", "updates"]].min().min(), frame.updates.max()])
    if reference is not None:
        span = np.array([min(span[0], min(ref)), max(span[1], max(ref))])
    fig.add_scatter(
        x=span,
        y=span,
        mode="lines",
        line={"dash": "dot", "color": "grey"},
        name="measured = predicted",
    )
    fig.update_xaxes(type="log", title_text="predicted updates")
    fig.update_yaxes(type="log", title_text="measured updates")
    fig.update_layout(title="emergence law", template="plotly_white")
    return fig


def frontier_figure(
    frame: pd.DataFrame, x: str = "repetition", y: str = "reliability", color: str = "updates"
) -> go.Figure:
    """A grid of runs placed by two data properties, coloured by emergence updates; runs
    without a transition are marked "none" (the Pareto frontier of [A]'s experiment 2).

    Args:
        frame: one row per run with columns ``x``, ``y``, ``color`` and ``transition``.
    """
    formed = frame[frame["transition"].astype(bool)]
    never = frame[~frame["transition"].astype(bool)]
    fig = go.Figure()
    fig.add_scatter(
        x=formed[x],
        y=formed[y],
        mode="markers+text",
        name="emerged",
        text=[f"{v:,.0f}" for v in formed[color]],
        textposition="top center",
        marker={
            "size": 18,
            "color": np.log10(formed[color].astype(float)),
            "colorscale": "Viridis_r",
            "colorbar": colorbar_of(f"log10 {color}"),
        },
    )
    fig.add_scatter(
        x=never[x],
        y=never[y],
        mode="markers+text",
        name="none",
        text=["none"] * len(never),
        textposition="top center",
        marker={"size": 14, "symbol": "x", "color": "grey"},
    )
    fig.update_layout(
        title=f"emergence over {x} x {y}",
        xaxis_title=x,
        yaxis_title=y,
        template="plotly_white",
    )
    return fig
