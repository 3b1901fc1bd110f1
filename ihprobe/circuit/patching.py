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

>>> result = patch(model)                 # induction pair, per head  # doctest: +SKIP
>>> result.fractions.max()                                                  # doctest: +SKIP
>>> path_patch(model, [(0, 3)], [(1, 2)], "k").fraction                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from jaxtyping import Int

from ihprobe.causal.masks import keep_mask
from ihprobe.circuit.pairs import LogitMetric, PatchPair, induction_pair, logit_diff, token_pair
from ihprobe.circuit.results import PatchResult, PathPatchResult
from ihprobe.core import calls, checks
from ihprobe.core.devices import stack_layers
from ihprobe.core.errors import IhprobeError
from ihprobe.core.hooks import hook_name
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance
from ihprobe.probes.engine import Hook, Probe, run_probe

PER = ("head", "head_position")
INPUTS = ("q", "k", "v")

Head = tuple[int, int]


def patch(
    model,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: LogitMetric | None = None,
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
    model = as_model(model)
    checks.choice("per", per, PER)
    pair, metric = _pair(model, clean, corrupted, corruption, n, batch, seed), metric or logit_diff
    cfg = model.cfg
    length = pair.clean.shape[1] if per == "head_position" else 0
    groups = _groups(cfg.n_layers, cfg.n_heads, length)
    with torch.no_grad():
        clean_run = _run(model, pair.clean, pair, metric, _keep_z(cfg.n_layers))
        corrupted_value = float(_run(model, pair.corrupted, pair, metric)["metric"].mean())
        rows = len(pair.corrupted)

        def patched(index, store) -> list[Hook]:
            spec, base = groups[index // rows], index % rows
            return [
                (hook_name("z", layer), _patch_group_z(clean_run[("z", layer)], spec, base, layer))
                for layer in range(cfg.n_layers)
            ]

        found = _run(model, pair.corrupted, pair, metric, patched, groups=len(groups))
    values = found["metric"].view(len(groups), rows).mean(1)
    return PatchResult(
        per=per,
        values=values.view(cfg.n_layers, cfg.n_heads, *([length] if length else [])),
        clean=float(clean_run["metric"].mean()),
        corrupted=corrupted_value,
        provenance=provenance(model),
        settings={"corruption": pair.corruption, "rows": rows, "seed": seed},
    )


def path_patch(
    model,
    sender: Iterable[Head],
    receivers: Iterable[Head],
    receiver_input: str = "k",
    *,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: LogitMetric | None = None,
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
    model = as_model(model)
    sender, receivers = _heads(model, sender, "sender"), _heads(model, receivers, "receivers")
    if receiver_input not in INPUTS:
        raise IhprobeError(f"receiver_input must be one of q, k, v (got {receiver_input!r}).")
    if max(layer for layer, _ in sender) >= min(layer for layer, _ in receivers):
        raise IhprobeError("every sender head must be in an earlier layer than every receiver.")
    pair = _pair(model, clean, corrupted, corruption, n, batch, seed)
    metric = metric or logit_diff
    n_layers = model.cfg.n_layers
    sending = 1 - keep_mask(model, sender)  # 1 at the sender heads
    with torch.no_grad():
        clean_run = _run(model, pair.clean, pair, metric, _keep_z(n_layers))
        corrupted_run = _run(model, pair.corrupted, pair, metric, _keep_z(n_layers))

        frozen = _sender_clean(clean_run, corrupted_run, sending, receivers, receiver_input)
        received = _run(model, pair.corrupted, pair, metric, frozen)

        def put(index, store) -> list[Hook]:
            return _put_inputs(model, receivers, receiver_input, received, index)

        patched = float(_run(model, pair.corrupted, pair, metric, put)["metric"].mean())
    clean_value, corrupted_value = (float(r["metric"].mean()) for r in (clean_run, corrupted_run))
    return PathPatchResult(
        sender, receivers, receiver_input, clean_value, corrupted_value, patched, provenance(model)
    )


def _sender_clean(clean_run, corrupted_run, sending, receivers, receiver_input):
    """Path patching's second pass: hooks that run the sender heads (1 in ``sending``) on their
    clean z and every other head on its corrupted z, and keep the receivers' inputs."""

    def frozen(index, store) -> list[Hook]:
        mixed = [
            (
                hook_name("z", layer),
                _mix_z(corrupted_run[("z", layer)][index], clean_run[("z", layer)][index], mask),
            )
            for layer, mask in enumerate(sending)
        ]
        return mixed + _keep_inputs(receivers, receiver_input, store)

    return frozen


def attribution_patch(
    model,
    clean: Int[torch.Tensor, "batch pos"] | None = None,
    corrupted: Int[torch.Tensor, "batch pos"] | None = None,
    metric: LogitMetric | None = None,
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
    model = as_model(model)
    checks.choice("per", per, PER)
    pair, metric = _pair(model, clean, corrupted, corruption, n, batch, seed), metric or logit_diff
    n_layers = model.cfg.n_layers
    with torch.no_grad():
        clean_run = _run(model, pair.clean, pair, metric, _keep_z(n_layers))
    leaves: dict[int, list[torch.Tensor]] = {}
    with torch.enable_grad():
        hooks = [(hook_name("z", layer), _leaf(leaves, layer)) for layer in range(n_layers)]
        value = _run(model, pair.corrupted, pair, metric, hooks)["metric"].mean()
        value.backward()
    sums = (0, 1, 3) if per == "head" else (0, 3)  # rows, (positions,) d_head
    estimate = []
    for layer in range(n_layers):
        z = torch.cat([leaf.detach() for leaf in leaves[layer]])
        grad = torch.cat([leaf.grad for leaf in leaves[layer]])
        estimate.append(((clean_run[("z", layer)] - z) * grad).sum(sums))
    estimate = stack_layers(estimate)  # each layer's on its own device under a device map
    if per == "head_position":
        estimate = estimate.transpose(1, 2)  # [layer, head, pos]
    corrupted_value = float(value.detach())
    return PatchResult(
        per=per,
        values=(corrupted_value + estimate).float().cpu(),
        clean=float(clean_run["metric"].mean()),
        corrupted=corrupted_value,
        method="attribution",
        provenance=provenance(model),
        settings={"corruption": pair.corruption, "rows": len(pair.clean), "seed": seed},
    )


# ----------------------------------------------------------------------------- running


def _run(model, rows, pair: PatchPair, metric: LogitMetric, hooks=(), groups: int = 1) -> dict:
    """``rows`` (stacked ``groups`` times) through the probe engine with ``hooks``: the per-row
    ``"metric"`` at ``pair.positions`` and whatever the hooks stored."""
    targets = pair.targets

    def score(logits, index):
        return {"metric": metric(logits, targets[index.to(targets.device)]).float().cpu()}

    probe = Probe("patching", rows, score, pair.positions)
    return run_probe(model, probe, hooks, chunk=None, groups=groups)


def _groups(n_layers: int, n_heads: int, length: int) -> Int[torch.Tensor, "group 3"]:
    """``(layer, head, pos)`` of every patch; pos -1 when ``length`` is 0 (whole head)."""
    layer, head, pos = torch.meshgrid(
        torch.arange(n_layers, device="cpu"),  # the patches' index table, read on the host
        torch.arange(n_heads, device="cpu"),
        torch.arange(length, device="cpu") if length else torch.tensor([-1], device="cpu"),
        indexing="ij",
    )
    return torch.stack([layer.flatten(), head.flatten(), pos.flatten()], dim=1)


# ----------------------------------------------------------------------------- hooks


def _patch_group_z(
    clean_z: torch.Tensor, spec: torch.Tensor, base: torch.Tensor, layer: int
) -> Callable:
    """Hook: row r takes its base row's clean ``z`` at the head (and position) of its group."""

    def hook(z, hook):
        s = spec.to(z.device)
        positions = torch.arange(z.shape[1], device=z.device)
        heads = torch.arange(z.shape[2], device=z.device)
        at_pos = (s[:, 2:3] < 0) | (s[:, 2:3] == positions)  # [r, pos]
        mask = (s[:, 0:1, None] == layer) & at_pos[:, :, None] & (s[:, None, 1:2] == heads)
        return torch.where(mask[..., None], clean_z[base.to(z.device)].to(z), z)

    return hook


def _mix_z(base: torch.Tensor, other: torch.Tensor, take: torch.Tensor) -> Callable:
    """Hook: ``z`` replaced by ``base``, with ``other`` at the heads where ``take`` is 1."""
    take = take.view(1, 1, -1, 1).to(base.dtype)

    def hook(z, hook):
        return (base * (1 - take) + other * take).to(z)

    return hook


def _keep_z(n_layers: int) -> Callable:
    """Hook factory: each layer's ``z`` kept under ``("z", layer)``."""

    def keep(layer, store):
        def hook(z, hook):
            store[("z", layer)] = z.detach()

        return hook

    return lambda index, store: [
        (hook_name("z", layer), keep(layer, store)) for layer in range(n_layers)
    ]


def _leaf(leaves: dict, layer: int) -> Callable:
    """Hook: ``z`` becomes a leaf that keeps its gradient, appended to ``leaves[layer]``."""

    def hook(z, hook):
        leaf = z.detach().requires_grad_(True)
        leaves.setdefault(layer, []).append(leaf)
        return leaf

    return hook


def _kv_index(model, head: int, receiver_input: str) -> int:
    """The index of ``head`` in ``hook_{receiver_input}`` (its K/V group for grouped heads)."""
    if receiver_input == "q":
        return head
    shared = getattr(model.cfg, "n_key_value_heads", None) or model.cfg.n_heads
    return head // (model.cfg.n_heads // shared)


def _keep_inputs(receivers: list[Head], receiver_input: str, store: dict) -> list[Hook]:
    """Hooks keeping the receiver layers' ``hook_{q,k,v}`` under ``("input", layer)``."""

    def keep(layer):
        def hook(x, hook):
            store[("input", layer)] = x.detach()

        return hook

    layers = sorted({layer for layer, _ in receivers})
    return [(hook_name(receiver_input, layer), keep(layer)) for layer in layers]


def _put_inputs(model, receivers, receiver_input: str, received: dict, index) -> list[Hook]:
    """Hooks putting the kept inputs of the receiver heads into rows ``index``."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in receivers:
        by_layer.setdefault(layer, []).append(_kv_index(model, head, receiver_input))

    def put(layer, heads):
        def hook(x, hook):
            x = x.clone()
            x[:, :, heads] = received[("input", layer)][index][:, :, heads].to(x)
            return x

        return hook

    return [
        (hook_name(receiver_input, layer), put(layer, sorted(set(heads))))
        for layer, heads in by_layer.items()
    ]


# ----------------------------------------------------------------------------- helpers


def _pair(model, clean, corrupted, corruption, n, batch, seed) -> PatchPair:
    calls.arguments(model=model, clean=clean, corrupted=corrupted, n=n, batch=batch, seed=seed)
    if (clean is None) != (corrupted is None):
        raise IhprobeError("pass both clean and corrupted rows, or neither for the default pair.")
    if clean is None:
        return induction_pair(model, corruption=corruption, n=n, batch=batch, seed=seed)
    return token_pair(model, clean, corrupted)


def _heads(model, heads: Iterable[Head], name: str) -> list[Head]:
    return checks.heads(name, heads, checks.model(model).cfg.n_layers, model.cfg.n_heads)
