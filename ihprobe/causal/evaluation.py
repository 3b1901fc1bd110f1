"""The evaluation of ablations: every metric for many head sets at once, on fresh rows.

The same evaluation rows are stacked once per group (clean, top, random draws; or every head
alone), each group with its own ``[layer, head]`` keep-mask applied in the ``hook_z`` hooks
(:mod:`ihprobe.causal.masks`), and the stacked batch runs through
:func:`~ihprobe.probes.engine.run_probe` in memory-bounded chunks. The rows are the repeated
random tokens of ``seed + 1`` (heads are ranked on those of ``seed``), natural text and
function-style tasks (:mod:`ihprobe.causal.tasks`).

>>> probe = repeated_probe(model, n=50, batch=100, seed=1, bos=False)       # doctest: +SKIP
>>> keeps = torch.stack([keep_mask(model, []), keep_mask(model, [(1, 0)])])  # doctest: +SKIP
>>> evaluate_groups(model, probe, keeps, None)["induction_loss"]            # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float

from ihprobe.causal.masks import derangement, hold_patterns, mask_hooks, mean_z
from ihprobe.causal.tasks import task_probes
from ihprobe.core.errors import IhprobeError
from ihprobe.probes.engine import (
    Probe,
    budget_rows,
    reads_text,
    recall_probe,
    run_probe,
    text_probe,
    token_rows,
)
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.metrics import ABLATION_METRICS, METRIC_TABLE
from ihprobe.probes.recall import icl_positions
from ihprobe.probes.record import activations

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

log = logging.getLogger(__name__)

METRICS = ABLATION_METRICS
TEXT_METRICS = tuple(m for m in METRICS if METRIC_TABLE[m].family == "text")
TASK_METRICS = tuple(m for m in METRICS if METRIC_TABLE[m].family == "tasks")
TEXT_LENGTH = 512  # tokens per natural-text row (enough for Olsson's tokens 50 and 500)


@torch.inference_mode()
def evaluate_groups(
    model: TransformerLensModel,
    probe: Probe,
    keeps: Float[torch.Tensor, "group layer head"],
    replacement: Float[torch.Tensor, "layer head d_head"]
    | Float[torch.Tensor, "rows layer pos head d_head"]
    | None,
    *,
    patterns: Float[torch.Tensor, "rows layer head query key"] | None = None,
    max_logits: int | None = None,
) -> dict[str, Float[torch.Tensor, " group"]]:
    """Every metric of ``probe`` for every group's keep-mask, in a few stacked forward passes.

    Group ``g`` runs all rows of ``probe.tokens`` with heads switched off where
    ``keeps[g] == 0``; row scores are averaged per group. Only the positions the probe reads
    are unembedded, so logits cost memory and time only there.

    Example:
        >>> keeps = torch.stack([keep_mask(model, []), keep_mask(model, [(1, 0)])])
        ... # doctest: +SKIP
        >>> evaluate_groups(model, probe, keeps, None)["induction_loss"]  # doctest: +SKIP
    """
    n_rows = len(probe.tokens)
    chunk = budget_rows(model, probe, max_logits) if max_logits else None  # else run_probe's

    per_row = replacement is not None and replacement.dim() == 5

    def masks(index, store):
        rows = index % n_rows
        hooks = mask_hooks(keeps[index // n_rows], replacement[rows] if per_row else replacement)
        return hooks + ([] if patterns is None else hold_patterns(patterns[rows]))

    found = run_probe(model, probe, masks, chunk=chunk, groups=len(keeps))
    return {k: v.double().cpu().view(len(keeps), n_rows).mean(1) for k, v in found.items()}


def natural_probe(
    model: TransformerLensModel,
    text: str | Sequence[str] | None = None,
    *,
    rows: int = 32,
    natural_loss: bool = True,
) -> Probe:
    """ICL score (and ``natural_loss``) on up to ``rows`` rows of ``min(n_ctx, 512)`` tokens of
    natural text (default: ihprobe's embedded corpus); only the ICL positions are unembedded
    without ``natural_loss``.

    Example:
        >>> natural_probe(model, rows=4).tokens.shape                      # doctest: +SKIP
        torch.Size([4, 128])
    """
    if not reads_text(getattr(model, "tokenizer", None)):
        raise IhprobeError(
            "this model has no text tokenizer (token ids only), so natural-text metrics "
            f"({', '.join(TEXT_METRICS)}) cannot run; load it with tokenizer=... or leave "
            "them out of metrics."
        )
    tokens = token_rows(model, text, rows=rows, length=min(model.cfg.n_ctx, TEXT_LENGTH))
    early, late = icl_positions(tokens.shape[1])
    return text_probe(tokens, early, late, natural_loss=natural_loss)


def repeated_probe(
    model: TransformerLensModel, *, n: int | None, batch: int, seed: int, bos: bool
) -> Probe:
    """AR accuracy, AR mean rank and induction loss on [A]'s repeated random tokens of ``seed``."""
    tokens = repeated_tokens(model, n=n, batch=batch, seed=seed, bos=bos)
    return recall_probe(model, tokens, (tokens.shape[1] - int(bos)) // 2, bos)


def metrics_for(model, metrics: Sequence[str] | None) -> list[str]:
    """``metrics`` without repeats, or every metric the model can run (text and task metrics
    need a tokenizer that reads text)."""
    if metrics is None:
        text_ok = reads_text(getattr(model, "tokenizer", None))
        if not text_ok:
            log.info("no text tokenizer: natural-text and task metrics are left out")
        return [m for m in METRICS if text_ok or m not in TEXT_METRICS + TASK_METRICS]
    return list(dict.fromkeys(metrics))


def probes_for(model, wanted, *, n, batch, seed, bos, text, rows, tasks) -> list[Probe]:
    """The evaluation probes the ``wanted`` metrics read: repeated tokens of ``seed + 1``,
    natural text, function-style tasks."""
    probes = []
    if any(m in wanted for m in ("ar_accuracy", "ar_mean_rank", "induction_loss")):
        # fresh rows: heads are ranked on scan's batch (seed), metrics measured on another
        probes.append(repeated_probe(model, n=n, batch=batch, seed=seed + 1, bos=bos))
    if any(m in wanted for m in TEXT_METRICS):
        probes.append(natural_probe(model, text, rows=rows, natural_loss="natural_loss" in wanted))
    if any(m in wanted for m in TASK_METRICS):
        probes += task_probes(model, tasks, seed=seed)
    elif tasks is not None:  # tasks given are never ignored without a word
        why = (
            "the model has token ids only (no tokenizer that reads text)"
            if not reads_text(getattr(model, "tokenizer", None))
            else f"the metrics include none of {', '.join(TASK_METRICS)}"
        )
        raise IhprobeError(f"tasks were given but {why}; drop the tasks or add a task metric.")
    return probes


def evaluate(model, probes, keeps, wanted, *, mode, reference, seed) -> dict[str, torch.Tensor]:
    """Every wanted metric for every group of ``keeps`` (one keep-mask per group) on ``probes``,
    ablated heads outputting what ``mode`` says; task metrics averaged over tasks."""
    shared = None if reference is None or mode in ("zero", "resample") else mean_z(model, reference)
    values: dict[str, torch.Tensor] = {}
    per_task: dict[str, torch.Tensor] = {}
    for probe in probes:
        replacement, patterns = _replacement(model, probe, mode, shared, seed)
        found = evaluate_groups(model, probe, keeps, replacement, patterns=patterns)
        if probe.task:
            per_task.update({f"{k}:{probe.name}": v for k, v in found.items()})
        else:
            values.update(found)
    for k in TASK_METRICS if per_task else ():  # every task weighs the same in the average
        values[k] = torch.stack([v for t, v in per_task.items() if t.startswith(k + ":")]).mean(0)
    ordered = {m: values[m] for m in wanted}
    ordered.update({k: v for k, v in per_task.items() if k.split(":")[0] in wanted})
    return ordered


def _replacement(model, probe: Probe, mode: str, shared, seed: int):
    """(what ablated heads output, clean patterns to hold or None) for one probe in ``mode``."""
    if mode == "zero":
        return None, None
    if mode == "resample":  # row b takes the z of row order[b]
        z = activations(model, probe, ("z",))["z"]
        return z[derangement(len(z), seed).to(z.device)], None
    mean = shared if shared is not None else mean_z(model, probe.tokens, valid=probe.valid)
    if mode == "mean":
        return mean, None
    return mean, activations(model, probe, ("pattern",))["pattern"]
