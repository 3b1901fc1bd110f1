"""Attention pattern of one head on one probe sequence, as a plotly heatmap.

>>> fig = attention_figure(model, tokens[0], layer=1, head=2)      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from jaxtyping import Float, Int

from ihprobe.probes.engine import Probe
from ihprobe.probes.record import activations


def attention_patterns(
    model, tokens: Int[torch.Tensor, " pos"], layers: Sequence[int] | None = None
) -> torch.Tensor:
    """Post-softmax attention ``[layer, head, query_pos, key_pos]`` of ``layers`` on one row.

    Example:
        >>> attention_patterns(model, tokens[0]).shape                     # doctest: +SKIP
        torch.Size([2, 4, 64, 64])
    """
    row = Probe("attention", tokens[None].to(model.cfg.device))
    return activations(model, row, ("pattern",), layers)["pattern"][0].float().cpu()


def attention_pattern(
    model, tokens: Int[torch.Tensor, "pos"], layer: int, head: int
) -> Float[torch.Tensor, "query_pos key_pos"]:
    """The post-softmax attention of head (layer, head) on one sequence, from one forward pass."""
    return attention_patterns(model, tokens, [layer])[0, head]


def attention_figure(
    model, tokens: Int[torch.Tensor, "pos"], layer: int, head: int, title: str | None = None
) -> go.Figure:
    """Heatmap of the head's attention; hover shows query and key tokens and the weight.

    On a repeated sequence ``[s_1..s_n, s_1..s_n]`` an induction head lights up the diagonal
    ``key = query - n + 1``: each token attends to the token after its earlier occurrence.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> tokens = ihprobe.repeated_tokens(model, batch=1)[0]
        >>> attention_figure(model, tokens, layer=1, head=0).layout.title.text is not None
        True
    """
    pattern = attention_pattern(model, tokens, layer, head).numpy()
    labels = token_labels(model, tokens)
    fig = go.Figure(
        go.Heatmap(
            z=pattern,
            x=list(range(len(labels))),
            y=list(range(len(labels))),
            customdata=[
                [[labels[q], labels[k]] for k in range(len(labels))] for q in range(len(labels))
            ],
            hovertemplate="query %{y} %{customdata[0]}<br>key %{x} %{customdata[1]}"
            "<br>attention %{z:.3f}<extra></extra>",
            colorscale="Blues",
            zmin=0,
            zmax=1,
        )
    )
    fig.update_layout(
        title=title or f"Attention of head L{layer}H{head}",
        xaxis_title="key position",
        yaxis_title="query position",
        yaxis_autorange="reversed",
        width=560,
        height=520,
        margin=dict(l=60, r=20, t=50, b=50),
    )
    return fig


def token_labels(model, tokens: torch.Tensor) -> list[str]:
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return [f"<{int(t)}>" for t in tokens]
    return [repr(tokenizer.decode([int(t)])) for t in tokens]
