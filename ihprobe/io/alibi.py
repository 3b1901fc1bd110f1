"""ALiBi attention in a pair pass: the bridge's own attention seam, one table row per bridge.

HF's Bloom and MPT attention modules add their ALiBi bias and take the softmax inline, with no
attention-function seam to hand SDPA's inputs over. TransformerLens's bridges for them (and for
Falcon with ``alibi``) rebuild that attention themselves in ``_reconstruct_attention(q, k, v,
**kwargs)``, from the split projections, with the ALiBi tensor and the mask HF's model built.
In a pair pass :func:`pair_reconstruction` stands in for that method: it reads the same tensors,
hands the layer's pattern hooks a :class:`~ihprobe.core.pairs.PairAttention` whose per-key
``bias`` is the architecture's own ALiBi tensor (``slope_h * j``, ``O(n * heads)``), and
computes the output exactly, a chunk of query rows at a time, without the pattern.

How the bridges differ is data (:data:`ALIBI_BRIDGES`): the keyword the bias arrives in, whether
it is added before the scores are scaled (Falcon) or after (Bloom, MPT), whether a boolean mask
marks blocked entries (MPT) or allowed ones, and the bridge attributes that hold a softmax scale
or a clamp of q, k and v (MPT's ``softmax_scale`` and ``clip_qkv``).

>>> sorted(ALIBI_BRIDGES)
['ALiBiJointQKVAttentionBridge', 'BloomAttentionBridge', 'MPTALiBiAttentionBridge']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ihprobe.core.pairs import PairAttention


@dataclass(frozen=True)
class AlibiLayout:
    """How one ALiBi attention bridge lays out what its ``_reconstruct_attention`` reads."""

    bias: str  # keyword of the per-key bias: [(batch *) head, 1, keys >= n], trailing keys used
    bias_before_scale: bool  # scores are (q . k + bias) * scale (Falcon), else scale * q . k + bias
    mask_blocks: bool = False  # a boolean mask is True where blocked (MPT), else where allowed
    scale: str | None = None  # bridge attribute with the softmax scale (None: head_dim ** -0.5)
    clip: str | None = None  # bridge attribute with a clamp of q, k and v (None or 0: none)


# TransformerLens attention bridge class -> its layout (Falcon's bridge is the generic one)
ALIBI_BRIDGES: dict[str, AlibiLayout] = {
    "BloomAttentionBridge": AlibiLayout("alibi", bias_before_scale=False),
    "ALiBiJointQKVAttentionBridge": AlibiLayout("alibi", bias_before_scale=True),
    "MPTALiBiAttentionBridge": AlibiLayout(
        "position_bias", False, mask_blocks=True, scale="_softmax_scale", clip="_clip_qkv"
    ),
}


def alibi_layout(attn) -> AlibiLayout | None:
    """The layout of ``attn``'s bridge class when it is an ALiBi bridge, else None.

    >>> alibi_layout(object()) is None
    True
    """
    return ALIBI_BRIDGES.get(type(attn).__name__)


def pair_reconstruction(attn, hooks: list[Callable]) -> Callable:
    """A stand-in for ALiBi bridge ``attn``'s ``_reconstruct_attention``: the same output,
    computed a chunk of query rows at a time, and ``hook(lazy, hook=None)`` called for each of
    ``hooks`` with the layer's :class:`PairAttention` (a lazy ``hook_pattern``)."""
    layout = ALIBI_BRIDGES[type(attn).__name__]

    def reconstruct(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs):
        clip = getattr(attn, layout.clip, None) if layout.clip else None
        if clip:  # MPT clamps the fused projections before splitting the heads
            q, k, v = (t.clamp(min=-clip, max=clip) for t in (q, k, v))
        heads = attn.config.n_heads
        kv_heads = getattr(attn.config, "n_key_value_heads", None) or heads
        q, k, v, batch, n, d_head = attn._reshape_qkv_to_heads(q, k, v, heads, kv_heads)
        k, v = attn._update_kv_cache(k, v, **kwargs)
        keys = k.shape[2]
        scale = getattr(attn, layout.scale, None) if layout.scale else None
        scale = d_head**-0.5 if scale is None else float(scale)
        bias = kwargs.get(layout.bias)
        if bias is not None:
            bias = bias.reshape(-1, heads, 1, bias.shape[-1])[..., -keys:].float()
            bias = bias * scale if layout.bias_before_scale else bias
        mask = kwargs.get("attention_mask")
        if mask is not None:
            mask = mask[..., :keys]
            mask = ~mask if mask.dtype == torch.bool and layout.mask_blocks else mask
        lazy = PairAttention(q, k, scale, mask, bias=bias)
        for hook in hooks:
            hook(lazy, hook=None)
        out = lazy.output(v).reshape(batch, n, heads * d_head)
        return attn._apply_output_projection(out), None

    return reconstruct


def bridge_seam_reason(attn) -> str | None:
    """Why ALiBi bridge ``attn`` cannot run :func:`pair_reconstruction`; None when it can.

    >>> bridge_seam_reason(object())
    'not an ALiBi attention bridge'
    """
    if alibi_layout(attn) is None:
        return "not an ALiBi attention bridge"
    if getattr(attn.config, "use_attn_result", False):
        return "the bridge forms per-head results (use_attn_result) only in its own attention"
    return None
