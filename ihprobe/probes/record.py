"""Whole activations of every row of a probe, kept through :func:`~ihprobe.probes.engine.run_probe`.

The scores keep small slices inside their hooks; a few consumers need whole activations: the
attention viewer and figure (one row's patterns), and resample and pattern-preserving ablation
(the clean run's ``hook_z`` and patterns). :func:`activations` runs the rows through the one
probe loop, unembedding nothing, and stacks what the hooks kept by layer.

>>> probe = Probe("one row", tokens[None])                                  # doctest: +SKIP
>>> activations(model, probe, ("pattern",))["pattern"].shape                # doctest: +SKIP
torch.Size([1, 2, 4, 64, 64])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from ihprobe.core.devices import stack_layers
from ihprobe.core.hooks import hook_name, keep
from ihprobe.probes.engine import NOTHING, Probe, run_probe

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel


@torch.inference_mode()
def activations(
    model: TransformerLensModel,
    probe: Probe,
    sites: Sequence[str],
    layers: Sequence[int] | None = None,
    *,
    chunk: int = 64,
) -> dict[str, torch.Tensor]:
    """Every row's activation at each per-layer hook site (``"z"``, ``"pattern"``, ...; see
    :data:`ihprobe.core.hooks.HOOK_POINTS`) of ``layers`` (default all), stacked on dim 1:
    ``{"z": [rows, layer, pos, head, d_head], "pattern": [rows, layer, head, query, key]}``.
    Memory grows with rows x layers x positions.

    Example:
        >>> activations(model, probe, ("z",))["z"].shape                    # doctest: +SKIP
        torch.Size([100, 2, 100, 4, 16])
    """
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)

    def make_hooks(rows, store):
        return [
            (hook_name(site, layer), keep(store, (site, layer), lambda x: x))
            for site in sites
            for layer in layers
        ]

    silent = Probe(probe.name, probe.tokens, positions=NOTHING)
    kept = run_probe(model, silent, make_hooks, chunk=chunk)
    return {s: stack_layers([kept[(s, layer)] for layer in layers], dim=1) for s in sites}
