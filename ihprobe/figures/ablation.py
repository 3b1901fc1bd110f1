"""Figures and report sections of causal ablation: drops, head sets, signature vs load-bearing.

>>> result = ihprobe.ablate(model)                                  # doctest: +SKIP
>>> drop_figure(result).show()                                      # doctest: +SKIP
>>> write_ablation_report("out/report.html", [result])              # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.report import Section, write_report

TOP_COLOR, RANDOM_COLOR, SIGNATURE_COLOR = "#d62728", "#7f7f7f", "#1f77b4"


def _changes(result, metric: str) -> tuple[np.ndarray, str]:
    """SPEC's relative drops of every group, or absolute changes when the clean value is 0."""
    drops = result.drops(metric).numpy()
    if np.isfinite(drops).all():
        return drops, "relative change"
    v = result.values[metric].double().numpy()
    return v - v[0], "change (clean is 0)"


def drop_figure(result, metrics: Sequence[str] | None = None) -> go.Figure:
    """One panel per metric: the random draws' drops (box and points) and the top set's (red).

    Per-task HITS entries (``hits@1:task``) are left out unless named in ``metrics``.

    Example:
        >>> drop_figure(ihprobe.ablate(model)).show()                  # doctest: +SKIP
    """
    metrics = list(metrics or [m for m in result.values if ":" not in m])
    changes = {m: _changes(result, m) for m in metrics}
    titles = [f"{m}<br><sub>{changes[m][1]}</sub>" for m in metrics]
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=titles)
    for col, metric in enumerate(metrics, start=1):
        changes_, _ = changes[metric]
        fig.add_trace(
            go.Box(
                y=changes_[2:], name="random", boxpoints="all", jitter=0.4, pointpos=0,
                marker_color=RANDOM_COLOR, showlegend=col == 1, legendgroup="random",
                hovertemplate="random draw: %{y:.3g}<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=["random"], y=[changes_[1]], name="top set", mode="markers",
                marker={"color": TOP_COLOR, "size": 14, "symbol": "diamond"},
                showlegend=col == 1, legendgroup="top",
                hovertemplate="top set: %{y:.3g}<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    fig.update_layout(
        title=f"Ablating the top {result.by} heads vs {len(result.random_heads)} random draws",
        height=380, width=max(420, 220 * len(metrics)), template="plotly_white",
    )  # fmt: skip
    return fig


def head_sets_figure(result) -> go.Figure:
    """Heatmap of the ranking score per head; "T" marks the top set, numbers count random picks.

    Example:
        >>> head_sets_figure(ihprobe.ablate(model)).show()             # doctest: +SKIP
    """
    scores = result.scores.double().numpy()
    picks = np.zeros_like(scores)
    for draw in result.random_heads:
        for layer, head in draw:
            picks[layer, head] += 1
    text = [[f"{int(p)}" if p else "" for p in row] for row in picks]
    for layer, head in result.top_heads:
        text[layer][head] = "T"
    fig = go.Figure(
        go.Heatmap(
            z=scores, text=text, texttemplate="%{text}", colorscale="Viridis",
            colorbar={"title": result.by},
            hovertemplate="layer %{y} head %{x}<br>score %{z:.3g}<br>%{text}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        title=f"{result.by} · T: top set · n: drawn n times",
        xaxis_title="head", yaxis_title="layer", template="plotly_white",
        height=max(260, 60 + 28 * scores.shape[0]), width=max(520, 120 + 34 * scores.shape[1]),
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1)
    return fig


def load_bearing_figure(frame: pd.DataFrame, metric: str, by: str) -> go.Figure:
    """Signature vs load-bearing over training, from the concatenated ``to_frame`` tables.

    Left axis: the largest ``by`` score of any head (the signature). Right axis: ``metric``'s
    drop under top-set ablation, with the random draws' mean and 95% interval.

    Example:
        >>> frame = pd.concat([r.to_frame() for r in results])         # doctest: +SKIP
        >>> load_bearing_figure(frame, "induction_loss", "prefix_matching").show()  # doctest: +SKIP
    """
    x = "tokens" if frame["tokens"].notna().all() else "step"
    signature = frame[frame.metric == by].groupby(x).value.max()
    stats = frame[frame.metric.str.startswith(metric + ".")].copy()
    stats["stat"] = stats.metric.str.slice(len(metric) + 1)
    table = stats.pivot_table(index=x, columns="stat", values="value").sort_index()
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=signature.index, y=signature.values, name=f"max {by} (signature)",
        mode="lines+markers", line={"color": SIGNATURE_COLOR},
    )  # fmt: skip
    fig.add_scatter(
        x=list(table.index) + list(table.index[::-1]),
        y=list(table.random_drop_hi) + list(table.random_drop_lo[::-1]),
        fill="toself", fillcolor="rgba(127,127,127,0.2)", line={"width": 0},
        name="random 95% interval", hoverinfo="skip", secondary_y=True,
    )  # fmt: skip
    fig.add_scatter(
        x=table.index, y=table.random_drop_mean, name="random drop (mean)",
        mode="lines+markers", line={"color": RANDOM_COLOR, "dash": "dash"}, secondary_y=True,
    )  # fmt: skip
    fig.add_scatter(
        x=table.index, y=table.top_drop, name="top-set drop (load-bearing)",
        mode="lines+markers", line={"color": TOP_COLOR}, secondary_y=True,
    )  # fmt: skip
    if x == "tokens" and (table.index > 0).all():
        fig.update_xaxes(type="log")
    fig.update_xaxes(title_text=f"training {x}")
    fig.update_yaxes(title_text=f"max {by}", secondary_y=False)
    fig.update_yaxes(title_text=f"{metric}: (ablated - clean) / clean", secondary_y=True)
    fig.update_layout(
        title=f"Signature vs load-bearing over training ({metric})", template="plotly_white",
        height=480, width=900, legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    return fig


METHOD = """
<p>Every head is scored by <code>{by}</code>. In every layer the top
<code>k = max(1, ceil({top} &times; n_heads)) = {k}</code> heads are ablated ({mode} ablation of
<code>hook_z</code>, the head's output before <code>W_O</code>{mean_note}), and the drop of every
metric, <code>(ablated - clean) / clean</code>, is compared with {random} random draws of {k}
other heads per layer (seed {seed}). All draws run stacked along the batch with one head mask per
group of rows. <b>p</b> is the share of random draws that hurt at least as much as the top set
(harm oriented per metric: lower accuracy, higher loss or rank); <b>ratio</b> is the top set's
harm over the random draws' mean harm. A head set that scores high but costs no more than random
heads is a <i>signature</i>; one that costs far more is <i>load-bearing</i> (SPEC section 4).</p>
"""


TABLE_COLUMNS = {
    "top_drop": "top drop", "random_drop_mean": "random drop", "random_drop_sd": "sd",
    "random_drop_lo": "2.5%", "random_drop_hi": "97.5%", "p_value": "p",
}  # fmt: skip
CURVE_METRICS = ("induction_loss", "ar_accuracy", "icl_score", "ar_mean_rank", "hits@1")


def _curve_metric(frame: pd.DataFrame, metrics: list[str]) -> str:
    """The metric of the over-training curve: the first of ``CURVE_METRICS`` whose drops are
    defined at every checkpoint (accuracy is 0 early in training, so its drops are not)."""
    for metric in [m for m in CURVE_METRICS if m in metrics] + metrics:
        drops = frame[frame.metric == f"{metric}.top_drop"].value
        if len(drops) and drops.notna().all():
            return metric
    return metrics[0]


def _label(result) -> str:
    parts = [html.escape(str(result.model_name))]
    if result.revision:
        parts.append(html.escape(result.revision))
    if result.step is not None:
        parts.append(f"step {result.step}")
    if result.tokens is not None:
        parts.append(f"{result.tokens:,} tokens")
    return " · ".join(parts)


def report_sections(results: Sequence, metric: str | None = None) -> list:
    """Sections of the ablation report: method, per-checkpoint charts and numbers, and for
    every model with several checkpoints (known step or tokens) the signature-vs-load-bearing
    curve of ``metric`` (default: the first of ``CURVE_METRICS`` defined at every checkpoint).

    Example:
        >>> write_report("r.html", "ablation", report_sections([result]))  # doctest: +SKIP
    """
    first = results[0]
    s = first.settings
    mean_note = (
        "; the replacement is the head's mean z over each probe's own rows"
        if s.get("mode") == "mean"
        else ""
    )
    method = METHOD.format(
        by=first.by, top=s.get("top"), k=s.get("heads_per_layer"), mode=s.get("mode"),
        random=s.get("random"), seed=s.get("seed"), mean_note=mean_note,
    )  # fmt: skip
    sections = [Section("Method", [method])]
    for model in dict.fromkeys(r.model_name for r in results):  # one curve per training run
        run = [r for r in results if r.model_name == model]
        if len(run) < 2 or any(r.step is None and r.tokens is None for r in run):
            continue
        frame = pd.concat([r.to_frame() for r in run], ignore_index=True)
        curve_metric = metric or _curve_metric(frame, list(first.values))
        sections.append(
            Section(
                f"Signature vs load-bearing over training: {model}",
                [load_bearing_figure(frame, curve_metric, first.by)],
            )
        )
    for result in results:
        table = result.summary().drop(columns="random_mean").rename(columns=TABLE_COLUMNS)
        top = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
        sections.append(
            Section(
                _label(result),
                [f"Top set: {top}.", head_sets_figure(result), drop_figure(result), table],
            )
        )
    return sections


def write_ablation_report(
    path: str | os.PathLike, results: Sequence, metric: str | None = None
) -> Path:
    """Write the self-contained HTML report of one or more ablation results.

    Example:
        >>> write_ablation_report("out/report.html", [ihprobe.ablate(model)])  # doctest: +SKIP
    """
    return write_report(
        path, "ihprobe ablate: causal ablation of heads", report_sections(results, metric)
    )
