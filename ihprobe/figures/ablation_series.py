"""Figures of causal ablation over training: signature against load-bearing, every head's effect,
and the report of :func:`ihprobe.ablation_trajectory`.

>>> table = ihprobe.ablation_trajectory("runs/demo/main")             # doctest: +SKIP
>>> load_bearing_figure(table, "ar_accuracy", "prefix_matching").show()  # doctest: +SKIP
>>> write_trajectory_report("out/report.html", table)                  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.causal.results import LOAD_BEARING_INDEX, metric_of
from ihprobe.figures.heads import OWN_TICKS, colorbar_of
from ihprobe.figures.report import Section, write_report

TOP_COLOR, RANDOM_COLOR, SIGNATURE_COLOR = "#d62728", "#7f7f7f", "#1f77b4"
PAGE_WIDTH = 900  # px: the report's column, so that no figure overflows it
CURVE_METRICS = ("induction_loss", "ar_accuracy", "icl_score", "ar_mean_rank", "hits@1")


def load_bearing_figure(frame: pd.DataFrame, metric: str, by: str) -> go.Figure:
    """Signature vs load-bearing over training, from the concatenated ``to_frame`` tables.

    Left axis: the largest ``by`` score of any head (the signature). Right axis: the
    load-bearing index of ``metric`` with its bootstrap 95% interval (2 marks a top set that
    hurts two random-draw sds more than the draws do).

    Example:
        >>> frame = pd.concat([r.to_frame() for r in results])         # doctest: +SKIP
        >>> load_bearing_figure(frame, "induction_loss", "prefix_matching").show()  # doctest: +SKIP
    """
    x = "tokens" if frame["tokens"].notna().all() else "step"
    signature = frame[frame.metric == by].groupby(x).value.max()
    stats = frame[frame.metric.str.startswith(metric + ".")].copy()
    stats["stat"] = stats.metric.str.slice(len(metric) + 1)
    table = stats.pivot_table(index=x, columns="stat", values="value", dropna=False).sort_index()
    table = table.replace([np.inf, -np.inf], np.nan)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=signature.index,
        y=signature.values,
        name=f"max {by} (signature)",
        mode="lines+markers",
        line={"color": SIGNATURE_COLOR},
    )
    _index_traces(fig, table)
    if x == "tokens" and (table.index > 0).all():
        fig.update_xaxes(type="log")
    fig.update_xaxes(title_text=f"training {x}")
    fig.update_yaxes(title_text=f"max {by}", secondary_y=False)
    fig.update_yaxes(title_text=f"{metric}: load-bearing index", secondary_y=True, **OWN_TICKS)
    fig.update_layout(
        title=f"Signature vs load-bearing over training ({metric})",
        template="plotly_white",
        height=480,
        width=PAGE_WIDTH,
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def _index_traces(fig: go.Figure, table: pd.DataFrame) -> None:
    """The load-bearing index, its 95% band and the index line, on the right axis."""
    fig.add_scatter(
        x=list(table.index) + list(table.index[::-1]),
        y=list(table.load_bearing_hi) + list(table.load_bearing_lo[::-1]),
        fill="toself",
        fillcolor="rgba(214,39,40,0.15)",
        line={"width": 0},
        name="index 95% interval",
        hoverinfo="skip",
        secondary_y=True,
    )
    fig.add_scatter(
        x=table.index,
        y=table["load_bearing_index"],
        name="load-bearing index",
        mode="lines+markers",
        line={"color": TOP_COLOR},
        secondary_y=True,
    )
    line = LOAD_BEARING_INDEX
    fig.add_hline(y=line, line={"color": RANDOM_COLOR, "dash": "dot"}, secondary_y=True)
    fig.add_annotation(
        text=f"index {line:g}",
        x=0,
        xref="paper",
        y=line,
        yref="y2",
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
        font={"color": RANDOM_COLOR},
    )


def head_effects_over_training(frame: pd.DataFrame, metric: str) -> go.Figure:
    """Each head's change of ``metric`` when ablated alone (rows ``L{layer}H{head}``) at every
    checkpoint (columns), from :func:`ihprobe.ablation_trajectory`'s table.

    Example:
        >>> head_effects_over_training(table, "ar_accuracy").show()         # doctest: +SKIP
    """
    rows = frame[frame.metric == f"{metric}.head_change"].copy()
    x = "tokens" if rows["tokens"].notna().all() else "step"
    rows["head_label"] = "L" + rows["layer"].astype(str) + "H" + rows["head"].astype(str)
    table = rows.pivot_table(index="head_label", columns=x, values="value", sort=False)
    bound = float(np.nanmax(np.abs(table.values))) if table.size else 1.0
    colors = "RdBu_r" if metric_of(metric).harm_sign > 0 else "RdBu"
    fig = go.Figure(
        go.Heatmap(
            z=table.values,
            x=[str(c) for c in table.columns],
            y=list(table.index),
            colorscale=colors,
            zmid=0,
            zmin=-bound,
            zmax=bound,
            colorbar=colorbar_of(f"{metric} change"),
            hovertemplate="%{y} at %{x}: %{z:.3g}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{metric}: change when each head alone is ablated, over training",
        xaxis_title=f"training {x}",
        template="plotly_white",
        width=PAGE_WIDTH,
        height=max(300, 120 + 18 * len(table)),
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def curve_metric(frame: pd.DataFrame, metrics: list[str]) -> str:
    """The metric of the over-training curve: the first of ``CURVE_METRICS`` whose index is
    finite at every checkpoint (accuracy is 0 early in training, so its index may not be)."""
    for metric in [m for m in CURVE_METRICS if m in metrics] + metrics:
        index = frame[frame.metric == f"{metric}.load_bearing_index"].value
        if len(index) and np.isfinite(index).all():
            return metric
    return metrics[0]


def write_trajectory_report(
    path: str | os.PathLike, table: pd.DataFrame, by: str = "prefix_matching"
) -> Path:
    """The report of :func:`ihprobe.ablation_trajectory`: per metric, signature vs load-bearing
    over training and every head's effect over training.

    Example:
        >>> write_trajectory_report("out/report.html", ablation_trajectory("runs/demo"))
        ... # doctest: +SKIP
    """
    metrics = list(
        dict.fromkeys(
            m.rsplit(".", 1)[0] for m in table.metric if m.endswith(".load_bearing_index")
        )
    )
    sections = []
    for model in table.model.unique():
        run = table[table.model == model]
        for metric in metrics:
            blocks = [load_bearing_figure(run, metric, by)]
            if (run.metric == f"{metric}.head_change").any():
                blocks.append(head_effects_over_training(run, metric))
            sections.append(Section(f"{model}: {metric}", blocks))
    return write_report(path, "ihprobe ablate --over-training", sections)
