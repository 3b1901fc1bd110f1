"""Which attention a forward pass runs: the explicit pattern, or SDPA with pairs read lazily.

TransformerLens's bridge rebuilds most architectures' attention itself and materialises every
layer's ``[batch, head, n, n]`` pattern whatever HF attention the model was loaded with; a pass
that needs whole patterns (the attention viewer, pattern ablation, ``activations``) runs it so,
with HF loaded in eager attention (:data:`LOAD_ATTENTION`, the one place ``load`` and
``as_model`` read it). A pass that only reads a few (query, key) pairs runs instead inside
:func:`pair_pass`: each attention bridge hands its inputs to HF's own attention module, whose
attention function is ihprobe's (registered as :data:`PAIRS` with HF's SDPA mask): SDPA gives
the output, and the layer's pattern hooks get a :class:`~ihprobe.core.pairs.PairAttention`
holding the queries and keys that SDPA was given (after rotary and QK norms, grouped K heads,
the layer's scale, softcap and mask), so memory stays ``O(n * heads)`` per row; the MLPs run
over chunks of positions (:mod:`ihprobe.io.positionwise`) and HF's attention modules over
chunks of query rows (:mod:`ihprobe.io.querywise`), so their activations stay small too.

Bloom, MPT and Falcon with ALiBi compute their weights inline in HF; there the seam is the
bridge's own attention, which rebuilds them (:mod:`ihprobe.io.alibi`: the ALiBi bias is a
per-key term of the pairs' scores). HF attention classes with neither seam are in
:data:`NO_SEAM` with the reason; :func:`fast_path_reason` says why a model cannot take the fast
path (None when it can).

>>> LOAD_ATTENTION, sorted(NO_SEAM)[:2]
('eager', ['Attention', 'GPTNeoSelfAttention'])
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator

from transformer_lens.hook_points import HookPoint
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from ihprobe.core.errors import IhprobeError
from ihprobe.core.pairs import PairAttention
from ihprobe.io.alibi import alibi_layout, bridge_seam_reason, pair_reconstruction
from ihprobe.io.positionwise import positionwise_chunks
from ihprobe.io.querywise import ChunkCache, collecting, querywise_attention

LOAD_ATTENTION = "eager"  # HF attention at load: the bridge's delegating classes need weights
PAIRS = "ihprobe_pairs"  # ihprobe's HF attention function: SDPA out, pairs from q and k
# HF attention class -> why its weights cannot be read from q and k at an attention seam
NO_SEAM: dict[str, str] = {
    "GPTNeoSelfAttention": "GPT-Neo computes its (unscaled, local) weights inline",
    "XGLMAttention": "XGLM computes its weights inline (no attention function)",
    "Attention": "OpenAI GPT computes its weights inline (no attention function)",
}
ATTENTION_MODES = ("auto", "pairs", "patterns")  # what a scan may ask for
# other per-layer hook sites a pair pass can still fire: site -> the bridge's submodule that
# fires it, which HF's attention module must itself call (GPT-2's joint QKV bridge splits
# its own projections, so HF's GPT2Attention never reaches the bridge's ``o``: no hook_z)
DELEGATED_SITES = {"z": "o"}
_ACTIVE: dict[int, list[Callable]] = {}  # id(HF attention module) -> its layer's pattern hooks


def _attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
    """HF's attention function in a pair pass: the output of SDPA (chunked exact attention
    where a softcap rules SDPA out), and the layer's pattern hooks fed a PairAttention."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    lazy = PairAttention(query, key, scale, attention_mask, kw.get("softcap"))
    chunked = collecting(module)
    if chunked is not None and chunked.collect:  # a first pass over query rows: no output
        chunked.add_queries(query)
        chunked.seen.update(scale=scale, softcap=lazy.softcap)
        b, h, rows, _ = query.shape
        return query.new_zeros(b, rows, h, value.shape[-1]), None  # HF's [batch, query, head, d]
    if chunked is None:  # a whole row (a chunked one's hooks get the whole row between passes)
        for hook in _ACTIVE.get(id(module), ()):
            hook(lazy, hook=None)
    if lazy.softcap is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kw
        )
    return lazy.output(value), None


AttentionInterface.register(PAIRS, _attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(PAIRS, sdpa_mask)


def forward_options(model) -> dict:
    """Keyword arguments of every probe pass: a bridge's HF model keeps no KV cache (it would
    hold every layer's keys and values until the pass ends: 1.6 GB for Pythia-410m at 8,192
    tokens).

    >>> forward_options(object())
    {}
    """
    return {"use_cache": False} if isinstance(model, TransformerBridge) else {}


def fast_path_reason(model, sites: tuple[str, ...] = ()) -> str | None:
    """Why ``model``'s pattern pairs cannot be read without its patterns, in a pass that also
    reads the per-layer hook ``sites`` (keys of :data:`DELEGATED_SITES`); None when they can.

    >>> fast_path_reason(object())
    'the model is not a TransformerLens bridge (no attention bridges to hand to HF)'
    """
    attentions = _attention_bridges(model)
    if attentions is None:
        return "the model is not a TransformerLens bridge (no attention bridges to hand to HF)"
    for layer, attn in enumerate(attentions):
        kind = type(attn.original_component).__name__
        if alibi_layout(attn) is not None:
            reason = bridge_seam_reason(attn)
            if reason is not None:
                return reason
        elif kind in NO_SEAM:
            return NO_SEAM[kind]
        hooked = _hooked_inside(attn, layer)
        if hooked:
            return f"a hook is set on {hooked}, which a pair pass would not fire"
        inside = _reached(attn)
        for site in sites:
            fires = attn._modules.get(DELEGATED_SITES[site])
            if fires is None or not any(m is fires for m in inside):
                return f"HF's {kind} does not reach the bridge's hook_{site}"
    return None


def _hooked_inside(attn, layer: int) -> str | None:
    """The first hook point under the attention bridge that holds a user's hook and that a
    pair pass would skip: the bridge's own (``hook_pattern``, ``hook_attn_scores``,
    ``hook_rot_q``...) fire only when it rebuilds the attention, and a submodule's (``hook_q``
    on GPT-2's split projections) only when the pass calls that submodule."""
    inside = _reached(attn)
    for name, point in attn.named_modules():
        if not isinstance(point, HookPoint) or name in ("hook_in", "hook_out"):
            continue
        if not (point._forward_hooks or point._forward_pre_hooks or point._backward_hooks):
            continue
        owner = attn.get_submodule(name.rsplit(".", 1)[0]) if "." in name else None
        if owner is None or not any(m is owner for m in inside):
            return f"blocks.{layer}.attn.{name}"
    return None


def _reached(attn) -> list:
    """The modules a pair pass calls inside the layer's attention: HF's module and its own
    submodules, or, where the bridge's attention is the seam (ALiBi), the bridge's submodules
    (its split q, k, v and output projection)."""
    if alibi_layout(attn) is not None:
        return [m for m in attn.modules() if m is not attn]
    return list(attn.original_component.modules())


def choose_attention(
    model, attention: str = "auto", sites: tuple[str, ...] = ()
) -> tuple[str, str | None]:
    """The attention a pass that gathers pattern pairs (and reads ``sites``) runs, ``"pairs"``
    or ``"patterns"``, and, when it is not ``"pairs"``, why. ``"auto"`` takes pairs where the
    model can.

    >>> choose_attention(object(), "patterns")
    ('patterns', 'asked for')

    Raises:
        IhprobeError: an unknown mode, or ``"pairs"`` for a model that cannot take them.
    """
    if attention not in ATTENTION_MODES:
        raise IhprobeError(
            f"attention={attention!r} is not one of {', '.join(ATTENTION_MODES)} (auto: pairs "
            "from queries and keys where the model can, else full patterns)."
        )
    if attention == "patterns":
        return "patterns", "asked for"
    reason = fast_path_reason(model, sites)
    if reason is not None and attention == "pairs":
        raise IhprobeError(f"attention='pairs' cannot run on this model: {reason}.")
    return ("pairs", None) if reason is None else ("patterns", reason)


def _attention_bridges(model) -> list | None:
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return None
    found = [getattr(block, "attn", None) for block in blocks]
    if not found or not all(isinstance(a, AttentionBridge) for a in found):
        return None
    if any(a.original_component is None for a in found):
        return None
    return found


@contextlib.contextmanager
def pair_pass(model, layer_hooks: dict[int, list[Callable]]) -> Iterator[None]:
    """Within this block, ``model``'s forward passes run HF's attention with SDPA and call
    ``layer_hooks[layer]`` with each layer's :class:`PairAttention` (as ``hook(lazy, hook=None)``,
    like a ``hook_pattern`` hook), with the MLPs run over chunks of positions
    (:func:`~ihprobe.io.positionwise.positionwise_chunks`) and the attention over chunks of
    query rows (:func:`~ihprobe.io.querywise.querywise_attention`). Everything is put back on
    leaving, even on error.

    Raises:
        IhprobeError: the model cannot take the fast path (:func:`fast_path_reason`).
    """
    reason = fast_path_reason(model)
    if reason is not None:
        raise IhprobeError(f"pattern pairs need the full patterns here: {reason}.")
    attentions = _attention_bridges(model)
    bridged = any(alibi_layout(attn) is not None for attn in attentions)  # HF's masks kept
    configs = {} if bridged else {id(c): c for c in _configs(model, attentions)}
    before = {key: c._attn_implementation for key, c in configs.items()}
    try:
        for layer, attn in enumerate(attentions):
            hooks = list(layer_hooks.get(layer, ()))
            # in the instance's own dict: the bridge's __setattr__ would pass it on to HF's module
            if alibi_layout(attn) is not None:
                object.__setattr__(attn, "_reconstruct_attention", pair_reconstruction(attn, hooks))
                continue
            object.__setattr__(attn, "forward", types.MethodType(AttentionBridge.forward, attn))
            _ACTIVE[id(attn.original_component)] = hooks
        for c in configs.values():
            c._attn_implementation = PAIRS
        seams = {i: a.original_component for i, a in enumerate(attentions) if not bridged}
        hooked = {layer for layer, hooks in layer_hooks.items() if hooks}
        chunks = querywise_attention(seams, _whole_row(attentions), hooked)
        with positionwise_chunks(model), chunks:
            yield
    finally:
        for attn in attentions:
            attn.__dict__.pop("forward", None)
            attn.__dict__.pop("_reconstruct_attention", None)
            _ACTIVE.pop(id(attn.original_component), None)
        for key, c in configs.items():
            c._attn_implementation = before[key]


def _whole_row(attentions) -> Callable[[int, ChunkCache, object], None]:
    """What a layer run over chunks of query rows does between its two passes: its pattern
    hooks get the whole row's queries and keys, with the mask HF gave the layer."""

    def done(layer: int, cache: ChunkCache, mask) -> None:
        module = attentions[layer].original_component
        seen = cache.seen
        lazy = PairAttention(cache.queries, cache.keys, seen["scale"], mask, seen["softcap"])
        for hook in _ACTIVE.get(id(module), ()):
            hook(lazy, hook=None)

    return done


def _configs(model, attentions) -> list:
    """The HF configs whose ``_attn_implementation`` the pass reads: the attention modules'
    and the wrapped model's (its mask is built from it)."""
    found = [getattr(a.original_component, "config", None) for a in attentions]
    found.append(getattr(getattr(model, "original_model", None), "config", None))
    return [c for c in found if c is not None]
