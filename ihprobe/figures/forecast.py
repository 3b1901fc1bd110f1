"""Figures of the live forecast and of the LLC: predicted against actual emergence over a run,
and the LLC beside the prefix-matching trajectory.

>>> fig = forecast_figure(forecast_records(records, law_prior(32, 64)), point)  # doctest: +SKIP
>>> fig = llc_figure(llc_trajectory("runs/demo/main"), table, point)           # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.dynamics.changepoint import EmergencePoint, curve
from ihprobe.dynamics.forecast import Forecast
from ihprobe.figures.heads import OWN_TICKS


def forecast_figure(
    forecasts: Sequence[Forecast], point: EmergencePoint | None = None, title: str | None = None
) -> go.Figure:
    """The predicted emergence (median and interval) after each update of the run, against
    the measured point (solid line, its bracketing checkpoints shaded); log y."""
    frame = pd.DataFrame([f.to_dict() for f in forecasts])
    fig = go.Figure()
    level = f"{frame.level.iloc[0]:.0%}" if len(frame) else ""
    fig.add_scatter(x=frame.at_step, y=frame.updates_high, mode="lines", line={"width": 0},
                    showlegend=False, hoverinfo="skip")  # fmt: skip
    fig.add_scatter(x=frame.at_step, y=frame.updates_low, mode="lines", line={"width": 0},
                    fill="tonexty", fillcolor="rgba(31,119,180,0.2)",
                    name=f"{level} interval")  # fmt: skip
    fig.add_scatter(x=frame.at_step, y=frame.updates, mode="lines+markers",
                    name="forecast (median)", line={"color": "#1f77b4"})  # fmt: skip
    if point is not None and point.transition:
        fig.add_hrect(y0=point.updates_low, y1=point.updates_high, fillcolor="orange",
                      opacity=0.15, line_width=0)  # fmt: skip
        fig.add_hline(y=point.updates, line={"color": "orange"},
                      annotation_text=f"measured ~{point.updates:,.0f} updates")  # fmt: skip
    fig.update_yaxes(type="log", title_text="predicted emergence (updates)")
    fig.update_xaxes(title_text="forecast made after (updates)")
    fig.update_layout(title=title or "emergence forecast over the run", template="plotly_white")
    return fig


def llc_figure(
    traj, table: pd.DataFrame | None = None, stage: EmergencePoint | None = None,
    point: EmergencePoint | None = None,
) -> go.Figure:  # fmt: skip
    """LLC per checkpoint (mean and per-chain spread) beside max prefix matching, with the
    LLC's change point and the PS emergence point; below, every chain's SGLD loss trace."""
    fig = make_subplots(rows=2, cols=1, specs=[[{"secondary_y": True}], [{}]],
                        row_heights=[0.65, 0.35], vertical_spacing=0.12,
                        subplot_titles=("LLC and max prefix matching",
                                        "SGLD loss traces (diagnostic)"))  # fmt: skip
    frame = traj.frame
    fig.add_scatter(x=frame.step, y=frame.llc_mean, name="LLC",
                    error_y={"type": "data", "array": frame.llc_std}, row=1, col=1)  # fmt: skip
    if table is not None:
        ps = curve(table, "prefix_matching", "max")
        fig.add_scatter(x=ps.step, y=ps.value, name="max PS", line={"color": "grey"},
                        row=1, col=1, secondary_y=True)  # fmt: skip
    for marked, color, label in (
        (stage, "purple", "LLC change"),
        (point, "orange", "PS emergence"),
    ):
        if marked is not None and marked.transition:
            fig.add_vline(x=marked.updates, line={"color": color, "dash": "dash"}, row=1, col=1,
                          annotation_text=f"{label} ~{marked.updates:,.0f}")  # fmt: skip
    for (step, chain), trace in traj.traces.groupby(["step", "chain"]):
        fig.add_scatter(x=trace.draw, y=trace.loss, mode="lines", showlegend=False,
                        line={"width": 1}, opacity=0.6, name=f"step {step} chain {chain}",
                        row=2, col=1)  # fmt: skip
    fig.update_xaxes(title_text="update", row=1, col=1)
    fig.update_xaxes(title_text="SGLD draw", row=2, col=1)
    fig.update_yaxes(title_text="LLC", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="max PS", row=1, col=1, secondary_y=True, **OWN_TICKS)
    fig.update_yaxes(title_text="loss", row=2, col=1)
    fig.update_layout(template="plotly_white", title="local learning coefficient over training")
    return fig
