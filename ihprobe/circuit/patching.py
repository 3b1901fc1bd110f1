"""Activation, path and attribution patching of attention heads.

Each method runs the corrupted rows of a :class:`~ihprobe.circuit.pairs.PatchPair` with some
activations taken from the clean run and reports the metric (default
:func:`~ihprobe.circuit.pairs.logit_diff`) as a *fraction restored*,
``(patched - corrupted) / (clean - corrupted)``: 0 when the patch changes nothing, 1 when it
gives back the whole clean-minus-corrupted difference.

* :func:`patch` -- each head's output ``z`` (``blocks.{l}.attn.hook_z``, ``[batch, pos, head,
  d_head]``) from the clean run, one head (``per="head"``) or one head at one position
  (``per="head_position"``) at a time. Every patch is one *group* of rows: the corrupted rows
  are stacked once per group, each group's rows carry the ``(layer, head, pos)`` they patch,
  and the stacked batch runs in chunks, so all patches cost a few forward passes.
* :func:`path_patch` (Wang et al. 2022) -- only the path from sender heads into the queries,
  keys or values (``hook_q/k/v``) of receiver heads: the sender's clean ``z`` is run with every
  other head frozen at its corrupted ``z`` (MLPs recompute), the receivers' inputs are kept,
  and a last corrupted run patches only those inputs.
* :func:`attribution_patch` (Nanda 2023) -- the first-order estimate
  ``(z_clean - z_corrupted) . d metric / d z`` at the corrupted run, for every head at once from
  one clean forward pass and one corrupted forward and backward pass.

>>> result = patch(model)                                   # induction pair, per head
>>> result.fractions.max()                                                  # doctest: +SKIP
>>> path_patch(model, [(0, 3)], [(1, 2)], "k").fraction                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float, Int

from ihprobe.circuit.pairs import Metric, PatchPair, induction_pair, logit_diff, token_pair
from ihprobe.errors import IhprobeError
from ihprobe.masks import keep_mask
from ihprobe.models import provenance
from ihprobe.probes.battery import _unembed_only

PER = ("head", "head_position")
INPUTS = ("q", "k", "v")
HOOK_Z = "blocks.{layer}.attn.hook_z"
HOOK_INPUT = "blocks.{layer}.attn.hook_{input}"
MAX_TOKENS = 2**13  # tokens per chunk of stacked rows (as ablation on a CPU)

Head = tuple[int, int]


@dataclass
class PatchResult:
    """The metric after each patch: ``values[layer, head]`` or ``values[layer, head, pos]``."""

    per: str
    values: Float[torch.Tensor, "layer head *pos"]
    clean: float
    corrupted: float
    method: str = "activation"
    model: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def fractions(self) -> Float[torch.Tensor, "layer head *pos"]:
        """``(patched - corrupted) / (clean - corrupted)``."""
        return (self.values - self.corrupted) / (self.clean - self.corrupted)

    def to_frame(self) -> pd.DataFrame:
        """``model, method, layer, head, position, value, fraction`` (position empty per head)."""
        index = torch.ones_like(self.values, dtype=torch.bool).nonzero().tolist()
        frame = pd.DataFrame(index, columns=["layer", "head", "position"][: self.values.ndim])
        if "position" not in frame:
            frame["position"] = pd.NA
        frame["value"] = self.values.flatten().tolist()
        frame["fraction"] = self.fractions.flatten().tolist()
        frame.insert(0, "method", self.method)
        frame.insert(0, "model", self.model)
        return frame.astype({"position": "Int64"})

    def figure(self):
        """Heatmap of the fractions restored (layer x head, or head x position)."""
        from ihprobe.figures.circuit import patch_figure

        return patch_figure(self)


@dataclass
class PathPatchResult:
    """The metric with only the sender -> receivers' ``receiver_input`` path patched."""

    sender: list[Head]
    receivers: list[Head]
    receiver_input: str
    clean: float
    corrupted: float
    patched: float

    @property
    def fraction(self) -> float:
        return (self.patched - self.corrupted) / (self.clean - self.corrupted)


def patch(
    model,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: Metric | None = None,
    *,
    per: str = "head",
    corruption: str = "second_half",
    n: int | None = None,
    batch: int = 20,
    seed: int = 0,
) -> PatchResult:
    """Patch each head's clean ``z`` into the corrupted run; the metric after every patch.

    Args:
        clean, corrupted: your own rows ``[batch, pos]`` (the metric then reads every position
            against the clean next token); None for :func:`~ihprobe.circuit.pairs.induction_pair`
            with ``corruption``, ``n``, ``batch`` and ``seed``.
        metric: ``metric(logits [row, query, vocab], targets [row, query]) -> [row]``;
            default the target's logit minus the mean logit.
        per: ``"head"`` (all positions of a head at once) or ``"head_position"``.

    Example:
        >>> patch(model, per="head").fractions      # [layer, head]          # doctest: +SKIP
    """
    if per not in PER:
        raise IhprobeError(f"per must be one of {', '.join(PER)} (got {per!r}).")
    pair = _pair(model, clean, corrupted, corruption, n, batch, seed)
    metric = metric or logit_diff
    cfg = model.cfg
    with torch.no_grad():
        clean_z: dict = {}
        clean_value = _mean_metric(model, pair.clean, pair, metric, lambda _: _keep_z(cfg, clean_z))
        clean_z = {layer: torch.cat(parts) for layer, parts in clean_z.items()}
        corrupted_value = _mean_metric(model, pair.corrupted, pair, metric)
        length = pair.clean.shape[1]
        groups = _groups(cfg.n_layers, cfg.n_heads, length if per == "head_position" else 0)
        values = _patched_groups(model, pair, metric, groups, clean_z)
    shape = (cfg.n_layers, cfg.n_heads) + ((length,) if per == "head_position" else ())
    return PatchResult(
        per=per,
        values=values.view(shape),
        clean=clean_value,
        corrupted=corrupted_value,
        model=provenance(model).model,
        settings={"corruption": pair.corruption, "rows": len(pair.clean), "seed": seed},
    )


def path_patch(
    model,
    sender: Iterable[Head],
    receivers: Iterable[Head],
    receiver_input: str = "k",
    *,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: Metric | None = None,
    corruption: str = "anchors",
    n: int | None = None,
    batch: int = 20,
    seed: int = 0,
) -> PathPatchResult:
    """Patch only the path from the ``sender`` heads into ``receiver_input`` of ``receivers``.

    The default corruption is ``"anchors"``: it changes what the previous-token head copies
    into the keys and leaves the queries' tokens alone (see :mod:`ihprobe.circuit.pairs`).
    With grouped K/V heads (Llama), patching a receiver's keys or values patches the K/V head
    it shares with the other query heads of its group.

    Example:
        >>> path_patch(model, [(0, 3)], [(1, 2)], "k").fraction             # doctest: +SKIP
        0.83
    """
    sender, receivers = _heads(model, sender), _heads(model, receivers)
    if receiver_input not in INPUTS:
        raise IhprobeError(f"receiver_input must be one of q, k, v (got {receiver_input!r}).")
    if max(layer for layer, _ in sender) >= min(layer for layer, _ in receivers):
        raise IhprobeError("every sender head must be in an earlier layer than every receiver.")
    pair = _pair(model, clean, corrupted, corruption, n, batch, seed)
    metric = metric or logit_diff
    cfg = model.cfg
    with torch.no_grad():
        clean_z, corrupted_z = {}, {}
        clean_value = _mean_metric(model, pair.clean, pair, metric, lambda _: _keep_z(cfg, clean_z))
        corrupted_value = _mean_metric(
            model, pair.corrupted, pair, metric, lambda _: _keep_z(cfg, corrupted_z)
        )
        clean_z, corrupted_z = (
            {k: torch.cat(v) for k, v in z.items()} for z in (clean_z, corrupted_z)
        )
        received: dict = {}
        sending = 1 - keep_mask(model, sender)  # 1 at the sender heads

        def frozen(rows: slice) -> list:
            hooks = [
                (
                    HOOK_Z.format(layer=layer),
                    _mix_z(corrupted_z[layer][rows], clean_z[layer][rows], sending[layer]),
                )  # fmt: skip
                for layer in range(cfg.n_layers)
            ]
            return hooks + _keep_inputs(model, receivers, receiver_input, received)

        _mean_metric(model, pair.corrupted, pair, metric, frozen)
        received = {layer: torch.cat(parts) for layer, parts in received.items()}
        patched = _mean_metric(
            model,
            pair.corrupted,
            pair,
            metric,
            lambda rows: _put_inputs(model, receivers, receiver_input, received, rows),
        )
    return PathPatchResult(sender, receivers, receiver_input, clean_value, corrupted_value, patched)


def attribution_patch(
    model,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: Metric | None = None,
    *,
    per: str = "head",
    corruption: str = "second_half",
    n: int | None = None,
    batch: int = 20,
    seed: int = 0,
) -> PatchResult:
    """First-order estimate of :func:`patch` for every head from one backward pass.

    ``values`` holds ``corrupted + (z_clean - z_corrupted) . grad`` summed over rows, positions
    (unless ``per="head_position"``) and ``d_head``, so its fractions compare directly with
    :func:`patch`'s. Arguments as for :func:`patch`.

    Example:
        >>> attribution_patch(model).fractions                                # doctest: +SKIP
    """
    if per not in PER:
        raise IhprobeError(f"per must be one of {', '.join(PER)} (got {per!r}).")
    pair = _pair(model, clean, corrupted, corruption, n, batch, seed)
    metric = metric or logit_diff
    cfg = model.cfg
    clean_z: dict = {}
    with torch.no_grad():
        clean_value = _mean_metric(model, pair.clean, pair, metric, lambda _: _keep_z(cfg, clean_z))
    corrupted_z: dict = {}
    with torch.enable_grad():
        hooks = [
            (HOOK_Z.format(layer=layer), _leaf(corrupted_z, layer)) for layer in range(cfg.n_layers)
        ]
        logits = model.run_with_hooks(
            pair.corrupted, fwd_hooks=hooks + _unembed_only(model, _at(pair.positions))
        )
        value = metric(_read(logits, pair.positions), pair.targets).mean()
        value.backward()
    sums = (0, 1, 3) if per == "head" else (0, 3)
    estimate = torch.stack(
        [
            ((torch.cat(clean_z[layer]) - z) * z.grad).sum(sums)
            for layer, z in sorted(corrupted_z.items())
        ]
    )
    if per == "head_position":
        estimate = estimate.transpose(1, 2)  # [layer, head, pos]
    corrupted_value = float(value.detach())
    return PatchResult(
        per=per,
        values=(corrupted_value + estimate).detach().float().cpu(),
        clean=clean_value,
        corrupted=corrupted_value,
        method="attribution",
        model=provenance(model).model,
        settings={"corruption": pair.corruption, "rows": len(pair.clean), "seed": seed},
    )


# ----------------------------------------------------------------------------- running


def _mean_metric(model, rows, pair: PatchPair, metric: Metric, make_hooks=None) -> float:
    """The metric over ``rows`` (chunked), ``make_hooks(row_slice)`` adding hooks per chunk."""
    return float(_metric_rows(model, rows, pair.targets, pair.positions, metric, make_hooks).mean())


def _metric_rows(model, rows, targets, positions, metric: Metric, make_hooks=None) -> torch.Tensor:
    """Per-row metric of ``rows`` run in chunks of at most :data:`MAX_TOKENS` tokens, unembedding
    only ``positions``. The one place patching runs the model: every patch goes through it."""
    chunk = max(1, MAX_TOKENS // rows.shape[1])
    values = []
    for start in range(0, len(rows), chunk):
        part = slice(start, min(start + chunk, len(rows)))
        hooks = (make_hooks(part) if make_hooks else []) + _unembed_only(model, _at(positions))
        logits = model.run_with_hooks(rows[part], fwd_hooks=hooks)
        values.append(metric(_read(logits, positions), targets[part]).float().cpu())
    return torch.cat(values)


def _patched_groups(model, pair: PatchPair, metric: Metric, groups, clean_z: dict) -> torch.Tensor:
    """The mean metric of each group ``(layer, head, pos)`` (pos -1: every position), its
    rows the corrupted ones with that head's clean ``z`` patched in, all groups stacked."""
    rows = len(pair.corrupted)
    stacked = pair.corrupted.repeat(len(groups), 1)
    group_of = torch.arange(len(stacked)) // rows
    base_of = torch.arange(len(stacked)) % rows

    def make_hooks(part: slice) -> list:
        spec = groups[group_of[part]]  # [r, 3]
        base = base_of[part]
        return [(HOOK_Z.format(layer=layer), _patch_group_z(clean_z[layer], spec, base, layer))
                for layer in range(model.cfg.n_layers)]  # fmt: skip

    values = _metric_rows(model, stacked, pair.targets.repeat(len(groups), 1), pair.positions,
                          metric, make_hooks)  # fmt: skip
    return values.view(len(groups), rows).mean(1)


def _groups(n_layers: int, n_heads: int, length: int) -> Int[torch.Tensor, "group 3"]:
    """``(layer, head, pos)`` of every patch; pos -1 when ``length`` is 0 (whole head)."""
    layer, head, pos = torch.meshgrid(
        torch.arange(n_layers),
        torch.arange(n_heads),
        torch.arange(length) if length else torch.tensor([-1]),
        indexing="ij",
    )
    return torch.stack([layer.flatten(), head.flatten(), pos.flatten()], dim=1)


# ----------------------------------------------------------------------------- hooks


def _patch_group_z(
    clean_z: torch.Tensor, spec: torch.Tensor, base: torch.Tensor, layer: int
) -> Callable:
    """Hook: row r takes its base row's clean ``z`` at the head (and position) of its group."""

    def hook(z, hook):
        positions = torch.arange(z.shape[1])
        heads = torch.arange(z.shape[2])
        at_pos = (spec[:, 2:3] < 0) | (spec[:, 2:3] == positions)  # [r, pos]
        mask = (spec[:, 0:1, None] == layer) & at_pos[:, :, None] & (spec[:, None, 1:2] == heads)
        return torch.where(mask[..., None].to(z.device), clean_z[base].to(z.dtype), z)

    return hook


def _mix_z(base: torch.Tensor, other: torch.Tensor, take: torch.Tensor) -> Callable:
    """Hook: ``z`` replaced by ``base``, with ``other`` at the heads where ``take`` is 1."""
    take = take.view(1, 1, -1, 1).to(base.dtype)

    def hook(z, hook):
        return (base * (1 - take) + other * take).to(z.device, z.dtype)

    return hook


def _keep_z(cfg, store: dict) -> list:
    """Hooks appending each layer's ``z`` to ``store[layer]`` (a list of chunks)."""

    def add(layer):
        def hook(z, hook):
            store.setdefault(layer, []).append(z.detach())

        return hook

    return [(HOOK_Z.format(layer=layer), add(layer)) for layer in range(cfg.n_layers)]


def _leaf(store: dict, layer: int) -> Callable:
    """Hook: ``z`` becomes a leaf that keeps its gradient, stored under ``store[layer]``."""

    def hook(z, hook):
        leaf = z.detach().requires_grad_(True)
        store[layer] = leaf
        return leaf

    return hook


def _kv_index(model, head: int, receiver_input: str) -> int:
    """The index of ``head`` in ``hook_{receiver_input}`` (its K/V group for grouped heads)."""
    if receiver_input == "q":
        return head
    shared = getattr(model.cfg, "n_key_value_heads", None) or model.cfg.n_heads
    return head // (model.cfg.n_heads // shared)


def _keep_inputs(model, receivers: list[Head], receiver_input: str, store: dict) -> list:
    layers = sorted({layer for layer, _ in receivers})
    return [(HOOK_INPUT.format(layer=layer, input=receiver_input),
             lambda x, hook, layer=layer: store.setdefault(layer, []).append(x.detach()))
            for layer in layers]  # fmt: skip


def _put_inputs(
    model, receivers: list[Head], receiver_input: str, stored: dict, rows: slice
) -> list:
    by_layer: dict[int, list[int]] = {}
    for layer, head in receivers:
        by_layer.setdefault(layer, []).append(_kv_index(model, head, receiver_input))

    def put(layer, heads):
        def hook(x, hook):
            x = x.clone()
            x[:, :, heads] = stored[layer][rows][:, :, heads].to(x.dtype)
            return x

        return hook

    return [(HOOK_INPUT.format(layer=layer, input=receiver_input), put(layer, sorted(set(heads))))
            for layer, heads in by_layer.items()]  # fmt: skip


# ----------------------------------------------------------------------------- helpers


def _pair(model, clean, corrupted, corruption, n, batch, seed) -> PatchPair:
    if (clean is None) != (corrupted is None):
        raise IhprobeError("pass both clean and corrupted rows, or neither for the default pair.")
    if clean is None:
        return induction_pair(model, corruption=corruption, n=n, batch=batch, seed=seed)
    return token_pair(model, clean, corrupted)


def _heads(model, heads: Iterable[Head]) -> list[Head]:
    found = [(int(layer), int(head)) for layer, head in heads]
    if not found:
        raise IhprobeError("name at least one head as (layer, head).")
    keep_mask(model, found)  # raises for a head that does not exist
    return found


def _at(positions: torch.Tensor) -> Callable:
    return lambda x: x[:, positions.to(x.device)]


def _read(logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The logits at ``positions`` (a model without the unembed hook returns all of them)."""
    return logits if logits.shape[1] == len(positions) else logits[:, positions.to(logits.device)]
