"""Figures of the live forecast and of the LLC: predicted against actual emergence over a run,
and the LLC beside the prefix-matching trajectory.

>>> fig = forecast_figure(forecast_records(records, law_prior(32, 64)), point)  # doctest: +SKIP
>>> fig = llc_figure(llc_trajectory("runs/demo/main"), table, point)           # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.curves import curve
from ihprobe.dynamics.forecast import Forecast
from ihprobe.figures.emergence import emergence_band
from ihprobe.figures.heads import OWN_TICKS

RANGE = 100  # the forecast axis spans at most this factor beyond the run's length either way
MARGIN = 1.3  # room beyond the outermost value drawn


def forecast_figure(
    forecasts: Sequence[Forecast], point: EmergencePoint | None = None, title: str | None = None
) -> go.Figure:
    """The predicted emergence (median and interval) after each update of the run, against
    the measured point (solid line, its bracketing checkpoints shaded).

    The y axis is log updates, clipped to the run's range (:func:`forecast_range`): an interval
    that runs past it, up to an unbounded one, fills to the edge, and its hover shows the value.

    Example:
        >>> from ihprobe import forecast_records, law_prior
        >>> rows = [{"step": s, "max_prefix_matching": 0.05} for s in (0, 100, 200)]
        >>> type(forecast_figure(forecast_records(rows, law_prior(32, 64)))).__name__
        'Figure'
    """
    frame = pd.DataFrame([f.to_dict() for f in forecasts])
    low, high = forecast_range(frame, point)
    fig = go.Figure()
    level = f"{frame.level.iloc[0]:.0%}" if len(frame) else ""
    fig.add_scatter(
        x=frame.at_step,
        y=frame.updates_high.clip(low, high).fillna(high),
        mode="lines",
        line={"width": 0},
        showlegend=False,
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=frame.at_step,
        y=frame.updates_low.clip(low, high).fillna(low),
        mode="lines",
        line={"width": 0},
        fill="tonexty",
        fillcolor="rgba(31,119,180,0.2)",
        name=f"{level} interval",
        customdata=frame[["updates_low", "updates_high"]].astype(str),
        hovertemplate="interval %{customdata[0]} to %{customdata[1]}<extra></extra>",
    )
    fig.add_scatter(
        x=frame.at_step,
        y=frame.updates,
        mode="lines+markers",
        name="forecast (median)",
        line={"color": "#1f77b4"},
    )
    if point is not None and point.transition:
        emergence_band(fig, point.updates_low, point.updates_high, "y")
        fig.add_hline(
            y=point.updates,
            line={"color": "orange"},
            annotation_text=f"measured ~{point.updates:,.0f} updates",
        )
    fig.update_yaxes(
        type="log",
        range=[math.log10(low), math.log10(high)],
        title_text="predicted emergence (updates)",
    )
    fig.update_xaxes(title_text="forecast made after (updates)")
    fig.update_layout(title=title or "emergence forecast over the run", template="plotly_white")
    return fig


def forecast_range(frame: pd.DataFrame, point: EmergencePoint | None = None) -> tuple[float, float]:
    """``(low, high)`` updates of the forecast's y axis: the finite forecasts and the measured
    point, clipped to ``RANGE`` times the run's length either way (a law's interval can run to
    1e308), with a margin.

    Example:
        >>> frame = pd.DataFrame({"at_step": [100, 400], "updates": [900.0, 350.0],
        ...                       "updates_low": [50.0, 300.0], "updates_high": [1e308, 400.0]})
        >>> [round(v) for v in forecast_range(frame)]
        [38, 52000]
    """
    span = float(frame.at_step.max()) if len(frame) else 1.0
    values = frame[["updates", "updates_low", "updates_high"]].to_numpy(float).ravel()
    if point is not None and point.transition:
        values = np.append(values, [point.updates_low, point.updates_high])
        span = max(span, float(point.updates_high))
    values = values[np.isfinite(values) & (values > 0)]
    span = max(span, 1.0)
    low = max(span / RANGE, values.min() if len(values) else span / RANGE)
    high = min(span * RANGE, max(values.max() if len(values) else span, 2 * span))
    return max(1.0, low / MARGIN), high * MARGIN


def llc_figure(
    traj,
    table: pd.DataFrame | None = None,
    stage: EmergencePoint | None = None,
    point: EmergencePoint | None = None,
) -> go.Figure:
    """LLC per checkpoint (mean and per-chain spread) beside max prefix matching, with the
    LLC's change point and the PS emergence point; below, every chain's SGLD loss trace.

    (Over 60 lines only by its example.)

    Example:
        >>> import pandas as pd
        >>> from ihprobe.dynamics.llc import LLCTrajectory, SGLDSettings
        >>> frame = pd.DataFrame({"step": [0, 1, 2], "tokens": [0, 64, 128],
        ...     "llc_mean": [5.0, 6.0, 9.0], "llc_std": 0.5, "init_loss": 3.0})
        >>> traces = pd.DataFrame(columns=["step", "chain", "draw", "loss"])
        >>> type(llc_figure(LLCTrajectory(frame, traces, SGLDSettings(), run="r"))).__name__
        'Figure'
    """
    fig = make_subplots(
        rows=2,
        cols=1,
        specs=[[{"secondary_y": True}], [{}]],
        row_heights=[0.65, 0.35],
        vertical_spacing=0.12,
        subplot_titles=("LLC and max prefix matching", "SGLD loss traces (diagnostic)"),
    )
    frame = traj.frame
    fig.add_scatter(
        x=frame.step,
        y=frame.llc_mean,
        name="LLC",
        error_y={"type": "data", "array": frame.llc_std},
        row=1,
        col=1,
    )
    if table is not None:
        ps = curve(table, "prefix_matching", "max")
        fig.add_scatter(
            x=ps.step,
            y=ps.value,
            name="max PS",
            line={"color": "grey"},
            row=1,
            col=1,
            secondary_y=True,
        )
    for marked, color, label in (
        (stage, "purple", "LLC change"),
        (point, "orange", "PS emergence"),
    ):
        if marked is not None and marked.transition:
            fig.add_vline(
                x=marked.updates,
                line={"color": color, "dash": "dash"},
                row=1,
                col=1,
                annotation_text=f"{label} ~{marked.updates:,.0f}",
            )
    _sgld_traces(fig, traj.traces, row=2)
    fig.update_xaxes(title_text="update", row=1, col=1)
    fig.update_xaxes(title_text="SGLD draw", row=2, col=1)
    fig.update_yaxes(title_text="LLC", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="max PS", row=1, col=1, secondary_y=True, **OWN_TICKS)
    fig.update_yaxes(title_text="loss", row=2, col=1)
    fig.update_layout(template="plotly_white", title="local learning coefficient over training")
    return fig


def _sgld_traces(fig: go.Figure, traces: pd.DataFrame, row: int) -> None:
    """Every chain's SGLD loss trace (``step, chain, draw, loss`` rows) in subplot ``row``."""
    for (step, chain), trace in traces.groupby(["step", "chain"]):
        fig.add_scatter(
            x=trace.draw,
            y=trace.loss,
            mode="lines",
            showlegend=False,
            line={"width": 1},
            opacity=0.6,
            name=f"step {step} chain {chain}",
            row=row,
            col=1,
        )
