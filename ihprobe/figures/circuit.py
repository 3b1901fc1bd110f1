"""Figures of the induction circuit: composition, patching, attribution and loss by position.

>>> composition_figure(ihprobe.composition(model, "k"))                    # doctest: +SKIP
>>> patch_figure(ihprobe.patch(model))                                     # doctest: +SKIP
>>> loss_by_position_figure(loss_by_position_over_run("runs/demo/main"))   # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.circuit.patching import PatchResult
from ihprobe.probes.composition import Composition

SIZE = {"width": 620, "height": 440, "margin": {"l": 70, "r": 20, "t": 50, "b": 60}}


def composition_figure(scores: Composition) -> go.Figure:
    """Senders (rows) by receivers (columns), value in baseline standard deviations."""
    n_layers, n_heads = scores.raw.shape[:2]
    labels = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    z = (scores.values / scores.baseline_sd).reshape(n_layers * n_heads, -1)
    fig = go.Figure(
        go.Heatmap(
            z=z.tolist(),
            x=labels,
            y=labels,
            colorscale="RdBu",
            zmid=0,
            colorbar={"title": "SDs"},
            hovertemplate="%{y} -> %{x}<br>%{z:.1f} baseline SDs<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{scores.kind.upper()}-composition minus random baseline "
        f"({scores.baseline:.3f} ± {scores.baseline_sd:.3f})",
        xaxis_title="receiver (later head)",
        yaxis_title="sender (earlier head)",
        yaxis_autorange="reversed",
        **SIZE,
    )
    return fig


def patch_figure(result: PatchResult) -> go.Figure:
    """Fraction restored by each patch: layer x head, or head x position."""
    fractions = result.fractions
    n_layers, n_heads = fractions.shape[:2]
    if result.per == "head":
        z, y = fractions.tolist(), [f"L{layer}" for layer in range(n_layers)]
        x = [f"H{head}" for head in range(n_heads)]
    else:
        z = fractions.reshape(n_layers * n_heads, -1).tolist()
        y = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
        x = list(range(fractions.shape[2]))
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, colorscale="RdBu", zmid=0,
                               colorbar={"title": "restored"}))  # fmt: skip
    fig.update_layout(
        title=f"{result.method.capitalize()} patching: fraction of the logit difference restored",
        xaxis_title="head" if result.per == "head" else "position",
        yaxis_autorange="reversed",
        **SIZE,
    )
    return fig


def attribution_scatter(activation: PatchResult, attribution: PatchResult) -> go.Figure:
    """Attribution estimate against activation patching, one point per head."""
    n_layers, n_heads = activation.values.shape[:2]
    labels = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    x, y = activation.fractions.flatten().tolist(), attribution.fractions.flatten().tolist()
    fig = go.Figure(go.Scatter(x=x, y=y, mode="markers+text", text=labels,
                               textposition="top center"))  # fmt: skip
    low, high = min(x + y + [0.0]), max(x + y + [1.0])
    fig.add_scatter(x=[low, high], y=[low, high], mode="lines", showlegend=False,
                    line={"color": "grey", "dash": "dot"})  # fmt: skip
    fig.update_layout(
        title="Attribution patching vs activation patching (fraction restored)",
        xaxis_title="activation patching",
        yaxis_title="attribution patching",
        showlegend=False,
        **SIZE,
    )
    return fig


def loss_by_position_figure(table: pd.DataFrame) -> go.Figure:
    """Loss against token position, one line per checkpoint (darker = later), per input."""
    inputs = [name for name in ("natural", "repeated") if name in set(table["input"])]
    fig = make_subplots(rows=1, cols=len(inputs), subplot_titles=inputs, shared_yaxes=True)
    order = table["tokens"].fillna(table["step"]).fillna(0)
    checkpoints = sorted(order.unique())
    for column, name in enumerate(inputs, start=1):
        for rank, when in enumerate(checkpoints):
            rows = table[(table["input"] == name) & (order == when)]
            shade = 0.25 + 0.75 * rank / max(1, len(checkpoints) - 1)
            label = _checkpoint_label(rows.iloc[0]) if len(rows) else str(when)
            fig.add_scatter(x=rows.position, y=rows.loss, mode="lines", name=label,
                            legendgroup=label, showlegend=column == 1,
                            line={"color": f"rgba(31, 119, 180, {shade:.2f})", "width": 1.5},
                            row=1, col=column)  # fmt: skip
        fig.update_xaxes(title_text="token position", type="log", row=1, col=column)
    fig.update_yaxes(title_text="loss (nats)", row=1, col=1)
    fig.update_layout(title="Loss by token position at each checkpoint", width=960, height=440)
    return fig


def _checkpoint_label(row: pd.Series) -> str:
    if pd.notna(row.get("step")):
        return f"step {int(row['step'])}"
    return str(row.get("model", ""))
