"""Every head alone: :func:`head_effects` ablates each head by itself, all ``layers x heads``
groups and the clean one stacked through the batched evaluation of
:func:`~ihprobe.causal.ablation.ablate` (:mod:`ihprobe.causal.evaluation`), on the same rows.

>>> effects = ihprobe.head_effects(model, ["ar_accuracy"])         # doctest: +SKIP
>>> effects.ranking("ar_accuracy")[:3]                              # doctest: +SKIP
>>> head_effects_figure(effects).show()  # ihprobe.figures.ablation   # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import torch
from einops import rearrange
from jaxtyping import Int

from ihprobe.causal.ablation import ablate, check_settings
from ihprobe.causal.choices import Mode
from ihprobe.causal.evaluation import evaluate, metrics_for, probes_for
from ihprobe.causal.results import HeadEffects
from ihprobe.core import calls
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = ["ROW_DEFAULTS", "EvaluationRows", "head_effects"]


class EvaluationRows(TypedDict, total=False):
    """Keyword arguments of :func:`head_effects`: the evaluation rows, as in :func:`ablate`."""

    seed: int
    n: int | None
    batch: int
    bos: bool
    text: str | Sequence[str] | None
    text_rows: int
    tasks: Sequence | None
    reference: Int[torch.Tensor, "batch pos"] | None


# the evaluation rows' defaults are ablate's own (one place)
ROW_DEFAULTS = {
    name: inspect.signature(ablate).parameters[name].default
    for name in EvaluationRows.__annotations__
}


@torch.inference_mode()
def head_effects(
    model: TransformerLensModel,
    metrics: Sequence[str] | None = None,
    mode: Mode = "mean",
    **rows: Unpack[EvaluationRows],
) -> HeadEffects:
    """Ablate every head alone: all ``layers x heads`` groups and the clean one stacked
    through the same batched evaluation as :func:`ablate`, on the same rows (``seed + 1``).

    Keyword arguments (``seed, n, batch, bos, text, text_rows, tasks, reference``) are those of
    :func:`ablate`. The cost is about ``layers x heads + 1`` forward passes of the probe rows
    (``lab/benchmarks/RESULTS_ablation.md``).

    Example:
        >>> effects = head_effects(model, ["ar_accuracy", "induction_loss"])   # doctest: +SKIP
        >>> effects.ranking("ar_accuracy")[0]                                 # doctest: +SKIP
        (1, 2, 0.93)
        >>> effects.to_frame()          # layer, head, metric, clean, ablated, change, ...
        ... # doctest: +SKIP
    """
    model = as_model(model)
    unknown = set(rows) - set(ROW_DEFAULTS)
    if unknown:
        raise TypeError(f"head_effects() got unexpected keyword arguments {sorted(unknown)}")
    s = {**ROW_DEFAULTS, **rows}
    calls.arguments(
        model=model,
        groups=model.cfg.n_layers * model.cfg.n_heads,
        **{k: v for k, v in s.items() if k not in ("text", "tasks")},
    )
    check_settings(top=1, random=1, mode=mode, metrics=metrics)
    wanted = metrics_for(model, metrics)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    keeps = torch.ones(1 + n_layers * n_heads, n_layers * n_heads, device=model.cfg.device)
    keeps[1:].fill_diagonal_(0.0)  # group 1 + i ablates head i (layer-major)
    keeps = rearrange(keeps, "group (layer head) -> group layer head", layer=n_layers)
    probes = probes_for(
        model,
        wanted,
        n=s["n"],
        batch=s["batch"],
        seed=s["seed"],
        bos=s["bos"],
        text=s["text"],
        rows=s["text_rows"],
        tasks=s["tasks"],
    )
    values = evaluate(
        model, probes, keeps, wanted, mode=mode, reference=s["reference"], seed=s["seed"]
    )
    settings = {
        "mode": mode,
        **{k: s[k] for k in ("seed", "n", "batch", "bos")},
        "probes": {p.name: list(p.tokens.shape) for p in probes},
    }
    return HeadEffects(provenance(model), (n_layers, n_heads), values, settings)
