"""Head ablation masks on ``hook_z``: switch heads off, per model or per batch row.

A head is ablated by replacing its value-weighted output ``z`` (``blocks.{l}.attn.hook_z``,
``[batch, pos, head, d_head]``, before ``W_O``) with zero or with its mean over a reference
batch. A keep-mask holds 1 for heads that run normally and 0 for ablated ones; the hook computes
``z * keep + (1 - keep) * replacement``. The mask is ``[layer, head]`` for the whole batch, or
``[batch, layer, head]`` so that every row runs with its own set of heads switched off: the
ablation code stacks the top set and many random sets along the batch and pays a few forward
passes for all of them. Grouped-KV models (Llama) have ``hook_z`` per *query* head, so a query
head is ablated on its own even when it shares its key/value head.

>>> with ablate_heads(model, [(1, 2)], mode="zero"):                # doctest: +SKIP
...     logits = model(tokens)
>>> hooks = ablation_hooks(model, [(1, 2)], mode="mean", reference=tokens)  # doctest: +SKIP
>>> logits = model.run_with_hooks(tokens, fwd_hooks=hooks)          # doctest: +SKIP
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int

from ihprobe.causal.choices import HOOK_MODES
from ihprobe.core.errors import IhprobeError
from ihprobe.core.hooks import hook_name, replace_with
from ihprobe.io.any_model import as_model
from ihprobe.probes.engine import NOTHING, Probe, run_probe

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel


Hook = tuple[str, Callable]
Reference = Int[torch.Tensor, "batch pos"] | Float[torch.Tensor, "layer head d_head"]


def keep_mask(
    model: TransformerLensModel, heads: Iterable[tuple[int, int]]
) -> Float[torch.Tensor, "layer head"]:
    """A ``[n_layers, n_heads]`` mask of ones with a zero at every ``(layer, head)`` in ``heads``.

    Example:
        >>> keep_mask(model, [(0, 1)])[0]                               # doctest: +SKIP
        tensor([1., 0., 1., 1.])
    """
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    keep = torch.ones(n_layers, n_heads, device=model.cfg.device)
    for layer, head in _pairs(heads):
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise IhprobeError(
                f"head ({layer}, {head}) does not exist: the model has {n_layers} layers of "
                f"{n_heads} heads, so layer is in 0..{n_layers - 1} and head in 0..{n_heads - 1}."
            )
        keep[layer, head] = 0.0
    return keep


def _pairs(heads) -> list[tuple[int, int]]:
    """``heads`` as ``(layer, head)`` int pairs, or one line saying what to pass."""
    found = list(heads) if isinstance(heads, Iterable) and not isinstance(heads, str) else None
    ok = found is not None and all(
        isinstance(h, Sequence) and len(h) == 2 and all(_is_int(x) for x in h) for h in found
    )
    if not ok:
        raise IhprobeError(
            f"heads={heads!r}: pass a list of (layer, head) pairs, e.g. [(1, 2)] for one head."
        )
    return [(int(layer), int(head)) for layer, head in found]


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


@torch.inference_mode()
def mean_z(
    model: TransformerLensModel,
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    valid: Bool[torch.Tensor, "batch pos"] | None = None,
    chunk: int = 64,
) -> Float[torch.Tensor, "layer head d_head"]:
    """Each head's mean ``z`` over the rows and positions of a reference batch.

    The sums are reduced inside the hooks, so no activation is cached and nothing is
    unembedded. ``valid`` marks the positions to average over (padding excluded); by default
    every position counts.

    Example:
        >>> means = mean_z(model, repeated_tokens(model, seed=1))       # doctest: +SKIP
        >>> means.shape                                                  # doctest: +SKIP
        torch.Size([2, 4, 16])
    """
    cfg = model.cfg
    device = torch.device(cfg.device)  # sums stay on the model's device: no host sync
    sums = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.d_head, dtype=torch.float64, device=device)
    weights = torch.ones(tokens.shape, device=device) if valid is None else valid.to(device)
    weights = weights.to(torch.float64)

    def make_hooks(rows, store):
        weight = weights[rows.to(device)]

        def add(z, hook, layer):  # reduce, and accumulate in float64, on the device
            w = weight.to(z.device, torch.float32)
            sums[layer] += torch.einsum("bphd,bp->hd", z.float(), w).double().to(sums.device)
            return z

        return [(hook_name("z", i), _bind(add, i)) for i in range(cfg.n_layers)]

    run_probe(model, Probe("reference", tokens, positions=NOTHING), make_hooks, chunk=chunk)
    count = float(weights.sum())
    if count == 0:
        raise IhprobeError("the reference batch for mean ablation is empty; pass some tokens.")
    return (sums / count).to(dtype=cfg.dtype, device=cfg.device)


def _bind(fn: Callable, layer: int) -> Callable:
    """``fn`` with the layer bound: inside a hook ``hook.name`` is the bridge's internal name."""

    def hook(z, hook):
        return fn(z, hook, layer)

    return hook


def mask_hooks(
    keep: Float[torch.Tensor, "layer head"] | Float[torch.Tensor, "batch layer head"],
    replacement: Float[torch.Tensor, "layer head d_head"]
    | Float[torch.Tensor, "batch layer pos head d_head"]
    | None = None,
) -> list[Hook]:
    """``hook_z`` hooks that apply a keep-mask: ``z * keep + (1 - keep) * replacement``.

    Args:
        keep: 1 keeps a head, 0 ablates it (fractions interpolate). ``[layer, head]`` applies
            to every row; ``[batch, layer, head]`` gives each row its own mask and must match
            the batch the hooks will see.
        replacement: what an ablated head outputs instead: its mean ``[layer, head, d_head]``
            (``mean_z``), or per row ``[batch, layer, pos, head, d_head]`` (resampling, from
            :func:`~ihprobe.probes.record.activations`); None means zero.

    Returns:
        ``(hook name, function)`` pairs for ``run_with_hooks`` or ``model.hooks``, one per layer
        that has an ablated head.

    Example:
        >>> logits = model.run_with_hooks(x, fwd_hooks=mask_hooks(keep_mask(model, [(0, 1)])))
        ... # doctest: +SKIP
    """
    per_row = keep.dim() == 3
    layers = keep.shape[-2]
    hooks = []
    for layer in range(layers):
        k = keep[..., layer, :]
        if bool((k == 1).all()):
            continue
        hooks.append((hook_name("z", layer), _mask_fn(k, replacement, layer, per_row)))
    return hooks


def _mask_fn(k: torch.Tensor, replacement: torch.Tensor | None, layer: int, per_row: bool):
    def hook(z, hook):
        if per_row and k.shape[0] != z.shape[0]:
            raise IhprobeError(
                f"a per-row head mask holds {k.shape[0]} rows but the batch has {z.shape[0]}; "
                "build the mask for exactly the rows you run."
            )
        m = (k[:, None, :, None] if per_row else k[None, None, :, None]).to(z.device, z.dtype)
        if replacement is None:
            return z * m
        r = replacement[layer] if replacement.dim() == 3 else replacement[:, layer]
        return z * m + (1 - m) * r.to(z.device, z.dtype)

    return hook


def hold_patterns(patterns: Float[torch.Tensor, "batch layer head query key"]) -> list[Hook]:
    """``hook_pattern`` hooks that hold every head's attention at ``patterns`` (its clean
    value), so an ablation changes the residual stream but no head's attention.

    Example:
        >>> clean = activations(model, probe, ("pattern",))["pattern"]  # doctest: +SKIP
        >>> hooks = mask_hooks(keep) + hold_patterns(clean)                    # doctest: +SKIP
    """
    return [
        (
            hook_name("pattern", layer),
            replace_with(lambda p, layer=layer: _held(p, patterns[:, layer])),
        )
        for layer in range(patterns.shape[1])
    ]


def _held(pattern: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    return clean.to(pattern.device, pattern.dtype)


def derangement(n: int, seed: int = 0) -> Int[torch.Tensor, " n"]:
    """A random permutation with no fixed point (a random cycle): row ``b`` takes row
    ``order[b]``'s activations in resample ablation.

    >>> order = derangement(5, seed=1); bool((order != torch.arange(5)).all())
    True
    """
    if n < 2:
        raise IhprobeError("resample ablation needs at least 2 evaluation rows; pass batch >= 2.")
    cycle = torch.randperm(n, generator=torch.Generator().manual_seed(seed), device="cpu")
    order = torch.empty(n, dtype=torch.long, device=cycle.device)
    order[cycle] = cycle.roll(-1)
    return order


def ablation_hooks(
    model: TransformerLensModel,
    heads: Iterable[tuple[int, int]],
    mode: str = "zero",
    reference: Reference | None = None,
) -> list[Hook]:
    """The ``hook_z`` hooks that ablate exactly ``heads``, as a list for ``run_with_hooks``.

    Args:
        model: a hooked model.
        heads: ``(layer, head)`` pairs to switch off.
        mode: ``"zero"`` replaces ``z`` by 0; ``"mean"`` by the head's mean ``z`` over
            ``reference``.
        reference: for ``mode="mean"``: token ids ``[batch, pos]`` to average over, or the
            means themselves ``[layer, head, d_head]`` (from :func:`mean_z`).

    Example:
        >>> hooks = ablation_hooks(model, [(1, 0), (1, 3)])            # doctest: +SKIP
        >>> logits = model.run_with_hooks(tokens, fwd_hooks=hooks)      # doctest: +SKIP
    """
    keep = keep_mask(model, heads)
    return mask_hooks(keep, replacement_for(model, mode, reference))


def replacement_for(model: TransformerLensModel, mode: str, reference) -> torch.Tensor | None:
    """What ablated heads output in ``mode``: None (zero) or the mean ``z`` per head."""
    if mode not in HOOK_MODES:
        raise IhprobeError(
            f"mode={mode!r} is not one of {HOOK_MODES} here; resample and pattern ablation "
            "need the evaluation rows: use ihprobe.ablate or ihprobe.head_effects."
        )
    if mode == "zero":
        return None
    if reference is None:
        raise IhprobeError(
            "mode='mean' replaces a head's z by its mean over a reference batch: pass "
            "reference=tokens (e.g. ihprobe.probes.inputs.repeated_tokens(model)) "
            "or use mode='zero'."
        )
    if reference.is_floating_point():
        cfg = model.cfg
        if tuple(reference.shape) != (cfg.n_layers, cfg.n_heads, cfg.d_head):
            raise IhprobeError(
                f"reference means have shape {tuple(reference.shape)}; expected "
                f"({cfg.n_layers}, {cfg.n_heads}, {cfg.d_head}) = (layer, head, d_head)."
            )
        return reference
    return mean_z(model, reference)


@contextmanager
def ablate_heads(
    model: TransformerLensModel,
    heads: Iterable[tuple[int, int]],
    mode: str = "zero",
    reference: Reference | None = None,
) -> Iterator:
    """Ablate exactly ``heads`` while the block is open; the model is restored on exit.

    Only the hooks added here are removed on exit; hooks the caller attached stay.

    Args:
        model: a hooked model (``ihprobe.load``).
        heads: ``(layer, head)`` pairs.
        mode: ``"zero"`` or ``"mean"`` (needs ``reference``), as in :func:`ablation_hooks`.
        reference: token ids or precomputed means for ``mode="mean"``.

    Example:
        >>> with ihprobe.ablate_heads(model, [(1, 2)], mode="zero"):    # doctest: +SKIP
        ...     logits = model(tokens)
    """
    model = as_model(model)
    hooks = ablation_hooks(model, heads, mode, reference)
    with model.hooks(fwd_hooks=hooks):
        yield model
