"""Function-vector scores fast: one corrupted pass with its keys and values kept serves every head.

Patching a head's ``z`` at the last position of layer ``l`` changes nothing before that
position, so the keys and values of every earlier position are those of the unpatched
corrupted prompt. Here the prompts are grouped by length (so no row is padded); each group's
prompts without their last token run once, keeping HF's KV cache, and then only the last token
runs, once per head, as rows of one batch: row ``prompt * groups + g`` reads the cache of its
prompt and has head ``g``'s ``z`` set to its mean at the input of the layer's output projection
(``W_O``, where ``hook_z`` is read). One group is left unpatched: the corrupted baseline. A
last-token row costs about ``1 / length`` of a whole prompt's pass, so scoring every head costs
a few prompt passes instead of one per head (``lab/benchmarks/RESULTS_fv.md``).

The single-token passes run HF's own attention modules, which keep the cache, inside the pair
pass (:func:`~ihprobe.io.attention.pair_pass`); a model that cannot take it (a hook inside its
attention, an attention class with no seam) is scored by the reference loop instead
(:mod:`ihprobe.causal.fv_reference`), and the result's settings say which ran.

>>> probs = fast_probabilities(model, prompts.corrupted, means)           # doctest: +SKIP
>>> probs.shape                        # [1 + layers * heads, prompts]     # doctest: +SKIP
torch.Size([9, 25])
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float

from ihprobe.causal.fv_reference import answer_probability
from ihprobe.causal.tasks import TaskPrompts
from ihprobe.core.errors import IhprobeError
from ihprobe.io.attention import fast_path_reason, pair_pass

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

# cache elements (keys and values, all layers) that one batch of last-token rows may hold
CACHE_ELEMENTS = {"cpu": 2**25, "accelerator": 2**28}


def fast_reason(model) -> str | None:
    """Why ``model`` cannot take the cached path (None when it can).

    >>> fast_reason(object())
    'the model is not a TransformerLens bridge (no attention bridges to hand to HF)'
    """
    return fast_path_reason(model)


@torch.inference_mode()
def fast_probabilities(
    model: TransformerLensModel,
    prompts: TaskPrompts,
    means: Float[torch.Tensor, "layer head d_head"],
) -> Float[torch.Tensor, "group prompt"]:
    """What :func:`~ihprobe.causal.fv_reference.patched_probabilities` gives (row 0 unpatched,
    row ``1 + layer * n_heads + head`` with that head patched), from one cached pass per prompt
    length and last-token passes.

    Example:
        >>> fast_probabilities(model, corrupted, means)[0]    # the baseline  # doctest: +SKIP
    """
    cfg = model.cfg
    groups = 1 + cfg.n_layers * cfg.n_heads
    found = torch.empty(groups, len(prompts.tokens), dtype=torch.float64, device="cpu")
    lengths = prompts.last + 1
    with pair_pass(model, {}):
        for n in sorted(set(lengths.tolist())):
            rows = torch.nonzero(lengths == n).flatten()
            tokens = prompts.tokens[rows, :n].to(cfg.device)
            if n < 2:
                raise IhprobeError("a task prompt has one token; give each task some pairs.")
            _, cache = model(tokens[:, :-1], return_type="logits_and_cache")
            answer = prompts.answer[rows].to(cfg.device)
            step = _groups_per_pass(model, len(rows), n)
            for start in range(0, groups, step):
                chunk = range(start, min(start + step, groups))
                probs = _last_tokens(model, tokens[:, -1:], cache, chunk, means, answer)
                found[chunk.start : chunk.stop, rows] = (
                    probs.view(len(rows), len(chunk)).T.double().cpu()
                )
    return found


def _groups_per_pass(model, rows: int, n: int) -> int:
    """How many patched groups one last-token pass holds: the cache copied for each of them
    within :data:`CACHE_ELEMENTS`, the logits within the probe engine's budget."""
    cfg = model.cfg
    kv_heads = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    per_row = 2 * cfg.n_layers * kv_heads * n * cfg.d_head + cfg.d_vocab
    kind = "cpu" if torch.device(cfg.device).type == "cpu" else "accelerator"
    return max(1, CACHE_ELEMENTS[kind] // (rows * per_row))


def _last_tokens(model, last, cache, chunk: range, means, answer) -> torch.Tensor:
    """The answer's probability for every (prompt, group) row, prompt-major: the last token
    run against a copy of the prefix cache repeated once per group of ``chunk``."""
    repeats = len(chunk)
    grown = copy.deepcopy(cache)
    grown.batch_repeat_interleave(repeats)
    with _patched(model, chunk, means, len(last)):
        logits = model(last.repeat_interleave(repeats, 0), cache=grown)  # HF 5: past_key_values
    return answer_probability(logits[:, -1], answer.repeat_interleave(repeats, 0))


@contextmanager
def _patched(model, chunk: range, means, n_rows: int) -> Iterator[None]:
    """Forward pre-hooks on each layer's output projection that set group ``g``'s head (group
    ``1 + layer * n_heads + head``; group 0 none) to its mean in rows ``prompt * len + g``."""
    cfg = model.cfg
    by_layer: dict[int, list[tuple[int, int]]] = {}
    for local, g in enumerate(chunk):
        if g:
            layer, head = divmod(g - 1, cfg.n_heads)
            by_layer.setdefault(layer, []).append((local, head))
    handles = []
    try:
        for layer, entries in by_layer.items():
            module = model.blocks[layer].attn.o.original_component
            hook = _pre_hook(entries, means[layer], len(chunk), n_rows, cfg.n_heads)
            handles.append(module.register_forward_pre_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _pre_hook(entries, means, repeats: int, n_rows: int, n_heads: int):
    """Set head ``h``'s slice of the output projection's input to ``means[h]`` in the rows of
    each ``(local group, h)`` entry."""
    local = torch.tensor([e[0] for e in entries], device="cpu")
    heads = torch.tensor([e[1] for e in entries], device="cpu")

    def hook(module, args):
        x = args[0]
        if x.shape[-1] != n_heads * means.shape[-1]:
            raise IhprobeError(
                f"the output projection takes {x.shape[-1]} features, not heads x d_head = "
                f"{n_heads} x {means.shape[-1]}; this architecture cannot be patched here."
            )
        x = x.clone()
        z = x.view(*x.shape[:-1], n_heads, -1)  # [batch, pos, head, d_head]
        rows = (torch.arange(n_rows, device="cpu")[:, None] * repeats + local[None, :]).flatten()
        at = heads.repeat(n_rows)
        z[rows.to(x.device), -1, at.to(x.device)] = means[at].to(x.device, x.dtype)
        return (x, *args[1:])

    return hook
