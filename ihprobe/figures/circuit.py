"""Figures of the induction circuit: composition, patching, attribution and loss by position.

>>> composition_figure(ihprobe.composition(model, "k"))                    # doctest: +SKIP
>>> patch_figure(ihprobe.patch(model))                                     # doctest: +SKIP
>>> loss_by_position_figure(loss_by_position_trajectory("runs/demo/main"))   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ihprobe.circuit.patching import PatchResult
from ihprobe.figures.heads import colorbar_of, fit_title
from ihprobe.probes.composition import Composition

SIZE = {"width": 620, "height": 440, "margin": {"l": 70, "r": 20, "t": 50, "b": 60}}
LABEL_GAP = 0.12  # named points lie at least this share of the axis span apart
NOISE_SDS = 4.0  # composition scores within this many baseline SDs are chance (docs/circuit.md)


def symmetric_range(values, least: float) -> dict:
    """A diverging scale centred on 0 that spans at least ``-least..least``: chance-level
    values stay pale instead of being stretched to the full scale.

    Example:
        >>> symmetric_range(torch.tensor([0.5, -2.0]), 4.0)
        {'zmin': -4.0, 'zmax': 4.0}
    """
    values = torch.as_tensor(values, dtype=torch.float64, device="cpu")
    finite = values[values.isfinite()]
    bound = max(least, float(finite.abs().max()) if finite.numel() else least)
    return {"zmin": -bound, "zmax": bound}


def composition_figure(scores: Composition) -> go.Figure:
    """Senders (rows) by receivers (columns), value in baseline standard deviations, on a scale
    that spans at least the +-4 SDs of chance.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> type(composition_figure(ihprobe.composition(model, "k"))).__name__
        'Figure'
    """
    n_layers, n_heads = scores.raw.shape[:2]
    labels = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    z = (scores.values / scores.baseline_sd).reshape(n_layers * n_heads, -1)
    fig = go.Figure(
        go.Heatmap(
            z=z.tolist(),
            x=labels,
            y=labels,
            colorscale="RdBu",
            **symmetric_range(z, NOISE_SDS),
            colorbar=colorbar_of("SDs"),
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
    return fit_title(fig, fig.layout.title.text)


def patch_figure(result: PatchResult) -> go.Figure:
    """Fraction restored by each patch: layer x head, or head x position, on a scale that spans
    at least -1..1 (all or none of the effect restored).

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> type(patch_figure(ihprobe.patch(model))).__name__
        'Figure'
    """
    fractions = result.fractions
    n_layers, n_heads = fractions.shape[:2]
    if result.per == "head":
        z, y = fractions.tolist(), [f"L{layer}" for layer in range(n_layers)]
        x = [f"H{head}" for head in range(n_heads)]
    else:
        z = fractions.reshape(n_layers * n_heads, -1).tolist()
        y = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
        x = list(range(fractions.shape[2]))
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x,
            y=y,
            colorscale="RdBu",
            colorbar=colorbar_of("restored"),
            **symmetric_range(fractions, 1.0),
        )
    )
    fig.update_layout(
        title=f"{result.method.capitalize()} patching: fraction of the logit difference restored",
        xaxis_title="head" if result.per == "head" else "position",
        yaxis_autorange="reversed",
        **SIZE,
    )
    return fit_title(fig, fig.layout.title.text)


def attribution_scatter(activation: PatchResult, attribution: PatchResult) -> go.Figure:
    """Attribution estimate against activation patching, one point per head; the heads that
    stand out are named (:func:`spaced_labels`: no two names overlap), every head on hover."""
    n_layers, n_heads = activation.values.shape[:2]
    labels = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    x, y = activation.fractions.flatten().tolist(), attribution.fractions.flatten().tolist()
    low, high = min(x + y + [0.0]), max(x + y + [1.0])
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=y,
            mode="markers+text",
            hovertext=labels,
            text=spaced_labels(x, y, labels, high - low),
            textposition="top center",
            hoverinfo="text+x+y",
        )
    )
    fig.add_scatter(
        x=[low, high],
        y=[low, high],
        mode="lines",
        showlegend=False,
        line={"color": "grey", "dash": "dot"},
    )
    fig.update_layout(
        title="Attribution patching vs activation patching (fraction restored)",
        xaxis_title="activation patching",
        yaxis_title="attribution patching",
        showlegend=False,
        **SIZE,
    )
    return fit_title(fig, fig.layout.title.text)


def spaced_labels(
    x: list[float], y: list[float], labels: list[str], span: float, gap: float = LABEL_GAP
) -> list[str]:
    """``labels`` with the crowded ones blanked: points are taken farthest from the origin
    first, and one is named only when, against every point already named, it lies at least
    ``gap * span`` away in x or in y, more than a name's width and height on the chart.

    Example:
        >>> spaced_labels([0.0, 0.01, 0.9], [0.0, 0.02, 0.8], ["a", "b", "c"], 1.0)
        ['', 'b', 'c']
    """
    named: list[tuple[float, float]] = []
    out = [""] * len(labels)
    for i in sorted(range(len(labels)), key=lambda i: -(x[i] ** 2 + y[i] ** 2)):
        if all(abs(x[i] - a) >= gap * span or abs(y[i] - b) >= gap * span for a, b in named):
            named.append((x[i], y[i]))
            out[i] = labels[i]
    return out


def loss_by_position_figure(table: pd.DataFrame, lines: int | None = 5) -> go.Figure:
    """Loss against token position, one line per checkpoint (darker = later), one panel per
    input the table holds (natural text only when it was measured). Positions are linear, and
    on repeated tokens a dotted line splits the first copy from the second, where induction
    acts. At most ``lines`` checkpoints are drawn (None: all): the first, the last and those
    whose mean loss is nearest to evenly spaced levels between them, so that the lines differ
    (most checkpoints of a run lie on one of a few curves).

    >>> table = pd.DataFrame({"input": "repeated", "position": [1, 2] * 3, "step": [0, 0, 1, 1,
    ...                       2, 2], "tokens": None, "loss": [4.0, 4.0, 4.0, 3.9, 1.0, 0.5]})
    >>> len(loss_by_position_figure(table, lines=2).data)
    2
    """
    inputs = [name for name in ("natural", "repeated") if name in set(table["input"])]
    titles = inputs if len(inputs) > 1 else None  # one panel: its input is in the title
    fig = make_subplots(rows=1, cols=len(inputs), subplot_titles=titles, shared_yaxes=True)
    order = table["tokens"].fillna(table["step"]).fillna(0)
    every = sorted(order.unique())
    checkpoints = spread_checkpoints(table, order, lines)
    for column, name in enumerate(inputs, start=1):
        for rank, when in enumerate(checkpoints):
            rows = table[(table["input"] == name) & (order == when)]
            shade = 0.25 + 0.75 * rank / max(1, len(checkpoints) - 1)
            label = _checkpoint_label(rows.iloc[0]) if len(rows) else str(when)
            fig.add_scatter(
                x=rows.position,
                y=rows.loss,
                mode="lines",
                name=label,
                legendgroup=label,
                showlegend=column == 1,
                line={"color": f"rgba(31, 119, 180, {shade:.2f})", "width": 1.5},
                row=1,
                col=column,
            )
        fig.update_xaxes(title_text="token position", row=1, col=column)
        if name == "repeated":
            _mark_halves(fig, second_half(table), column)
    fig.update_yaxes(title_text="loss (nats)", row=1, col=1)
    shown = (
        "each checkpoint"
        if len(checkpoints) == len(every)
        else (f"{len(checkpoints)} of {len(every)} checkpoints")
    )
    fig.update_layout(
        title=f"Loss by token position at {shown}" + ("" if titles else f" ({inputs[0]} tokens)"),
        width=480 * len(inputs) + 200,
        height=440,
    )
    return fig


def spread_checkpoints(table: pd.DataFrame, order: pd.Series, lines: int | None) -> list:
    """The checkpoints (values of ``order``) a figure of ``lines`` lines draws: the first, the
    last, and those whose mean loss lies nearest to evenly spaced levels between theirs."""
    every = sorted(order.unique())
    if lines is None or len(every) <= lines:
        return every
    mean = table.groupby(order)["loss"].mean()
    levels = np.linspace(mean[every[0]], mean[every[-1]], lines)[1:-1]
    chosen = {every[0], every[-1]}
    for level in levels:
        free = mean.drop(list(chosen))
        chosen.add((free - level).abs().idxmin())
    return sorted(chosen)


def second_half(table: pd.DataFrame) -> int:
    """The first predicted position of the second copy of the repeated rows ``[s, s]``: rows of
    ``2n`` tokens predict positions ``1 .. 2n - 1``, and the copy starts at ``n``."""
    return (int(table.loc[table["input"] == "repeated", "position"].max()) + 1) // 2


def _mark_halves(fig: go.Figure, half: int, column: int) -> None:
    axis = "x" if column == 1 else f"x{column}"
    fig.add_vline(x=half - 0.5, line={"color": "grey", "dash": "dot"}, row=1, col=column)
    for text, x, anchor in (("first copy", half - 1, "right"), ("second copy", half, "left")):
        fig.add_annotation(
            text=text,
            x=x,
            xref=axis,
            y=1,
            yref="paper",
            yanchor="top",
            xanchor=anchor,
            showarrow=False,
            font={"color": "grey"},
        )


def positions_text(table: pd.DataFrame) -> str:
    """What the loss-by-position figure shows on repeated tokens, from its numbers: each half's
    mean loss at the first and the last checkpoint.

    Example:
        >>> rows = [(step, p, loss) for step, first, second in ((0, 4.2, 4.2), (500, 4.6, 0.3))
        ...         for p, loss in [(1, first), (2, first), (3, second)]]
        >>> table = pd.DataFrame(rows, columns=["step", "position", "loss"]).assign(
        ...     input="repeated", tokens=None)
        >>> positions_text(table)[:60]
        "From the first checkpoint to the last, the second copy's mea"
    """
    rows = table[table["input"] == "repeated"]
    order = rows["tokens"].fillna(rows["step"]).fillna(0)
    half = second_half(table)
    first, last = (rows[order == when] for when in (order.min(), order.max()))
    means = [
        [float(r.loss[(r.position >= half) == second].mean()) for r in (first, last)]
        for second in (True, False)
    ]
    (second_from, second_to), (first_from, first_to) = means
    return (
        f"From the first checkpoint to the last, the second copy's "
        f"mean loss goes from {second_from:.2f} to {second_to:.2f} nats, and the first copy's "
        f"from {first_from:.2f} to {first_to:.2f} (nothing in the first copy can be predicted "
        "by copying). The dotted line splits the copies."
    )


def _checkpoint_label(row: pd.Series) -> str:
    if pd.notna(row.get("step")):
        return f"step {int(row['step'])}"
    return str(row.get("model", ""))
