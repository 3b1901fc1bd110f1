"""TransformerLens forward hooks that keep small slices of activations, nothing more.

A full ``run_with_cache`` keeps every activation of every layer; the probes need a few query
positions of a few of them. The hooks here are built from a ``store`` dict, a key, and a
``select`` function that cuts the slice; :func:`keep` runs ``select`` on the activation as it
passes and returns None, so the forward pass itself is unchanged and the big tensor is freed as
usual. :func:`replace_with` is the one hook that changes the pass: on ``unembed.hook_in`` it
lets only the query positions through, so that logits are computed where they are read.

Hook names come from one builder, :func:`hook_name` (TransformerLens's ``act_name`` idea),
over the table :data:`HOOK_POINTS` of the hook points ihprobe reads, with their shapes.
Inside a hook, ``hook.name`` is the component's internal name, so the key (usually the layer
index) is bound when the hook is made:

>>> store = {}
>>> hooks = [(hook_name("pattern", l), keep(store, l, pattern_pairs(q, k)))
...          for l in range(model.cfg.n_layers)]                     # doctest: +SKIP
>>> model.run_with_hooks(tokens, fwd_hooks=hooks)                     # doctest: +SKIP
>>> store[0].shape            # [batch, head, pairs]                  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import torch
from jaxtyping import Float, Int

from ihprobe.core.pairs import PairAttention, gather_pairs

Select = Callable[[torch.Tensor], torch.Tensor]

# site: (TransformerLens hook name, with {layer} for per-layer sites; activation shape)
HOOK_POINTS: dict[str, tuple[str, str]] = {
    "pattern": ("blocks.{layer}.attn.hook_pattern", "[batch, head, query_pos, key_pos]"),
    "z": ("blocks.{layer}.attn.hook_z", "[batch, pos, head, d_head]"),  # before W_O
    "q": ("blocks.{layer}.attn.hook_q", "[batch, pos, head, d_head]"),
    "k": ("blocks.{layer}.attn.hook_k", "[batch, pos, kv_head, d_head]"),
    "v": ("blocks.{layer}.attn.hook_v", "[batch, pos, kv_head, d_head]"),
    "scale": ("ln_final.hook_scale", "[batch, pos, 1]"),
    "unembed_in": ("unembed.hook_in", "[batch, pos, d_model]"),
}


def hook_name(site: str, layer: int | None = None) -> str:
    """The TransformerLens hook name of ``site`` (a key of :data:`HOOK_POINTS`) at ``layer``.

    Example:
        >>> hook_name("z", 1)
        'blocks.1.attn.hook_z'
        >>> hook_name("unembed_in")
        'unembed.hook_in'
    """
    template = HOOK_POINTS[site][0]
    if ("{layer}" in template) != (layer is not None):
        raise ValueError(f"hook site {site!r} {'needs' if layer is None else 'takes no'} layer")
    return template.format(layer=layer) if layer is not None else template


def keep(store: dict, key: Hashable, select: Select) -> Callable:
    """A forward hook that stores ``select(activation)`` under ``store[key]``.

    Example:
        >>> store = {}
        >>> hook = keep(store, 0, lambda x: x[:, -1])
        >>> hook(torch.arange(6.0).view(1, 2, 3), hook=None)
        >>> store[0]
        tensor([[3., 4., 5.]])
    """

    def hook(activation: torch.Tensor, hook) -> None:
        store[key] = accumulating(select(activation.detach()))

    return hook


def accumulating(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 when it is in a half-precision dtype: probes accumulate in float32.

    >>> accumulating(torch.ones(2, dtype=torch.bfloat16)).dtype
    torch.float32
    """
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def replace_with(select: Select) -> Callable:
    """A forward hook that passes ``select(activation)`` on instead of the activation.

    Used on ``unembed.hook_in`` to unembed only the positions a probe reads.

    Example:
        >>> hook = replace_with(lambda x: x[:, 1:])
        >>> hook(torch.zeros(2, 3, 4), hook=None).shape
        torch.Size([2, 2, 4])
    """

    def hook(activation: torch.Tensor, hook) -> torch.Tensor:
        return select(activation)

    return hook


def pattern_pairs(
    queries: Int[torch.Tensor, " pair"], keys: Int[torch.Tensor, " pair"]
) -> Callable[[Float[torch.Tensor, "batch head query_pos key_pos"]], torch.Tensor]:
    """Select ``pattern[:, :, queries[i], keys[i]]`` for every pair i: ``[batch, head, pair]``.

    One advanced-indexing gather on the ``pattern`` hook point; no loop over heads, rows
    or pairs. In a pair pass the hook gets a lazy :class:`~ihprobe.core.pairs.PairAttention`
    and only the pairs are computed.

    Example:
        >>> pattern = torch.eye(3).expand(1, 2, 3, 3)
        >>> pattern_pairs(torch.tensor([1, 2]), torch.tensor([1, 0]))(pattern)
        tensor([[[1., 0.],
                 [1., 0.]]])
    """

    def select(pattern: torch.Tensor | PairAttention) -> torch.Tensor:
        return gather_pairs(pattern, queries, keys)

    return select


def positions(
    pos: Int[torch.Tensor, " query"],
) -> Callable[[Float[torch.Tensor, "batch pos ..."]], torch.Tensor]:
    """Select ``activation[:, pos]`` of a ``[batch, pos, ...]`` activation (``hook_z``,
    ``ln_final.hook_scale``)."""

    def select(activation: torch.Tensor) -> torch.Tensor:
        return activation[:, pos.to(activation.device)]

    return select
