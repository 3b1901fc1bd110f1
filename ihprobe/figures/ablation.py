"""Figures and report sections of causal ablation: changes, head sets, per-head effects,
signature vs load-bearing.

>>> result = ihprobe.ablate(model)                                  # doctest: +SKIP
>>> drop_figure(result).show()                                      # doctest: +SKIP
>>> head_effects_figure(ihprobe.head_effects(model), "ar_accuracy")  # doctest: +SKIP
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

from ihprobe.causal.results import (
    VERDICT_RULE,
    AblationResult,
    HeadEffects,
    changes,
    metric_of,
)
from ihprobe.figures.ablation_series import (
    PAGE_WIDTH,
    RANDOM_COLOR,
    TOP_COLOR,
    curve_metric,
    load_bearing_figure,
)
from ihprobe.figures.heads import (
    color_range,
    colorbar_of,
    fit_title,
    layer_head_heatmap,
    where,
    wrap_title,
)
from ihprobe.figures.report import Markup, Section, write_report

PANELS_PER_ROW = 3


def _changes(result: AblationResult, metric: str) -> tuple[np.ndarray, str]:
    """Relative changes of every group, or absolute ones for absolute-only metrics and a
    clean value of 0."""
    change, relative = changes(metric, result.values[metric])
    if np.isfinite(relative).all():
        return relative, "relative change"
    return change, "change (absolute)"


def drop_figure(result: AblationResult, metrics: Sequence[str] | None = None) -> go.Figure:
    """One panel per metric: the random draws' changes (box and points) and the top set's
    (red), at most three panels per row so that the figure fits the page.

    Per-task HITS entries (``hits@1:task``) are left out unless named in ``metrics``.

    Example:
        >>> drop_figure(ihprobe.ablate(model)).show()                  # doctest: +SKIP
    """
    metrics = list(metrics or [m for m in result.values if ":" not in m])
    found = {m: _changes(result, m) for m in metrics}
    titles = [f"{m}<br><sub>{found[m][1]}</sub>" for m in metrics]
    n_rows = -(-len(metrics) // PANELS_PER_ROW)
    n_cols = min(len(metrics), PANELS_PER_ROW)
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=titles, vertical_spacing=0.18)
    for i, metric in enumerate(metrics):
        values, _ = found[metric]
        row, col = i // PANELS_PER_ROW + 1, i % PANELS_PER_ROW + 1
        fig.add_trace(
            go.Box(
                y=values[2:],
                name="random",
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker_color=RANDOM_COLOR,
                showlegend=i == 0,
                legendgroup="random",
                hovertemplate="random draw: %{y:.3g}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=["random"],
                y=[values[1]],
                name="top set",
                mode="markers",
                marker={"color": TOP_COLOR, "size": 14, "symbol": "diamond"},
                showlegend=i == 0,
                legendgroup="top",
                hovertemplate="top set: %{y:.3g}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(showticklabels=False, row=row, col=col)
    s = result.settings
    fig.update_layout(
        title=f"Top {result.by} heads ({s.get('scope', 'layer')} scope) vs "
        f"{len(result.random_heads)} {s.get('baseline', 'layer-matched')} draws",
        height=60 + 340 * n_rows,
        width=min(PAGE_WIDTH, max(420, 280 * n_cols)),
        template="plotly_white",
    )
    return fit_title(fig, fig.layout.title.text)


def head_effects_figure(effects: HeadEffects, metric: str) -> go.Figure:
    """Heatmap of each head's change of ``metric`` when it alone is ablated, layer x head,
    on a diverging scale centred on 0 (red: the metric got worse).

    Example:
        >>> head_effects_figure(ihprobe.head_effects(model), "ar_accuracy").show()  # doctest: +SKIP
    """
    change = effects.change(metric)
    worse_is_up = metric_of(metric).harm_sign > 0
    colors = "RdBu_r" if worse_is_up else "RdBu"
    n_layers, n_heads = effects.shape
    width = min(PAGE_WIDTH, max(420, 120 + 40 * n_heads))
    title = wrap_title(f"{metric}: change when each head alone is ablated", width)
    fig = layer_head_heatmap(change, f"{metric} change", title, colorscale=colors)
    bound = float(change.abs().max()) or 1.0
    fig.update_traces(zmid=0, zmin=-bound, zmax=bound)
    lines = title.count("<br>") + 2  # and the model's line
    fig.update_layout(
        title=f"{title}<br><sub>{where(effects.provenance)}</sub>",
        template="plotly_white",
        width=width,
        height=max(260, 100 + 30 * n_layers) + 22 * lines,
        margin={"t": 40 + 22 * lines},
    )
    return fig


def head_sets_figure(result) -> go.Figure:
    """Heatmap of the ranking score per head (a bounded score on its fixed 0..1 scale, so that
    chance-level noise stays dark); "T" marks the top set, numbers count random picks.

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
            z=scores,
            text=text,
            texttemplate="%{text}",
            colorbar=colorbar_of(result.by),
            **color_range(result.by),
            hovertemplate="layer %{y} head %{x}<br>score %{z:.3g}<br>%{text}<extra></extra>",
        )
    )
    width = min(PAGE_WIDTH, max(520, 120 + 34 * scores.shape[1]))
    fig.update_layout(
        title=wrap_title(f"{result.by} · T: top set · n: drawn n times", width),
        xaxis_title="head",
        yaxis_title="layer",
        template="plotly_white",
        height=max(260, 60 + 28 * scores.shape[0]),
        width=width,
    )
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1)
    return fig


METHOD = """
<p>Every head is scored by <code>{by}</code>; the top set is {top_rule} ({mode} ablation of
<code>hook_z</code>, the head's output before <code>W_O</code>{mean_note}). Each metric's change
<code>ablated - clean</code> (and, where the clean value keeps its sign, relative to clean) is
compared with {random} <b>{baseline}</b> baseline draws of other heads (seed {seed}); all groups
run stacked along the batch with one head mask per group of rows. <b>p</b> = (1 + draws that hurt
at least as much as the top set) / (draws + 1), harm oriented per metric (lower accuracy, higher
loss or rank). The <b>load-bearing index</b> is (top harm - mean draw harm) / sd(draw harm), with a
bootstrap 95% interval. A head set that scores high but costs no more than random heads is a
<i>signature</i>; one that costs far more is <i>load-bearing</i>. The verdict: {rule}{notes}</p>
"""

TABLE_COLUMNS = {
    "change": "change",
    "relative_change": "relative",
    "random_change_mean": "draws: change",
    "random_change_lo": "2.5%",
    "random_change_hi": "97.5%",
    "p_value": "p",
    "p_distinct": "p (distinct sets)",
    "distinct_sets": "distinct sets",
    "load_bearing_index": "index",
    "load_bearing_lo": "index 2.5%",
    "load_bearing_hi": "index 97.5%",
}


def _top_rule(s: dict) -> str:
    if s.get("scope", "layer") == "layer":
        k = s.get("heads_per_layer")
        return f"the top <code>k = {k}</code> heads of every layer (top={s.get('top')})"
    return (
        f"the top <code>{s.get('top_count')}</code> heads of the whole model (top={s.get('top')})"
    )


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
    curve of ``metric`` (default: :func:`~ihprobe.figures.ablation_series.curve_metric`).

    Example:
        >>> write_report("r.html", "ablation", report_sections([result]))  # doctest: +SKIP
    """
    first = results[0]
    s = first.settings
    mean_note = (
        "; the replacement is the head's mean z over each probe's own rows"
        if s.get("mode") in ("mean", "pattern")
        else ""
    )
    notes = "".join(f" <br><i>{html.escape(n)}.</i>" for n in s.get("notes", []))
    method = Markup(
        METHOD.format(
            by=first.by,
            top_rule=_top_rule(s),
            mode=s.get("mode"),
            random=s.get("random"),
            baseline=s.get("baseline", "layer-matched"),
            seed=s.get("seed"),
            mean_note=mean_note,
            rule=html.escape(VERDICT_RULE),
            notes=notes,
        )
    )
    sections = [Section("Method", [method])]
    for model in dict.fromkeys(r.model_name for r in results):  # one curve per training run
        run = [r for r in results if r.model_name == model]
        if len(run) < 2 or any(r.step is None and r.tokens is None for r in run):
            continue
        frame = pd.concat([r.to_frame() for r in run], ignore_index=True)
        shown = metric or curve_metric(frame, list(first.values))
        sections.append(
            Section(
                f"Signature vs load-bearing over training: {model}",
                [load_bearing_figure(frame, shown, first.by)],
            )
        )
    for result in results:
        summary = result.summary()
        table = summary[["metric", "clean", "top", *TABLE_COLUMNS]].rename(columns=TABLE_COLUMNS)
        top = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
        verdict = Markup(
            f'<p class="verdict"><b>Verdict.</b> {html.escape(str(result.verdict()))}</p>'
        )
        blocks = [verdict, f"Top set: {top}.", head_sets_figure(result), drop_figure(result), table]
        sections.append(Section(_label(result), blocks))
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
