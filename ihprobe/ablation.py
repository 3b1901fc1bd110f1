"""Causal ablation: does the model depend on its top-scoring heads more than on random ones?

SPEC section 4 ([B]): score every head (prefix matching by default), switch off the top
``k_l = max(1, ceil(top * n_heads))`` heads of every layer, and compare each ICL metric's drop
with the drops of ``random`` draws of ``k_l`` other heads per layer. A circuit that is merely
visible (a *signature*) scores high but costs little when removed; a *load-bearing* one costs
far more than random heads.

All groups are evaluated together: the same evaluation rows are stacked once per group (clean,
top, then the random draws), each group with its own ``[layer, head]`` keep-mask applied in the
``hook_z`` hooks (:mod:`ihprobe.masks`), and the stacked batch runs in memory-bounded chunks.

>>> result = ihprobe.ablate(model, by="prefix_matching", top=0.02, random=20)   # doctest: +SKIP
>>> result.summary()[["metric", "top_drop", "random_drop_mean", "p_value"]]     # doctest: +SKIP
>>> drop_figure(result).show()          # ihprobe.figures.ablation          # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int

from ihprobe.ablation_result import AblationResult
from ihprobe.errors import IhprobeError
from ihprobe.head_sets import check_random, head_sets, heads_per_layer
from ihprobe.inputs import repeated_tokens
from ihprobe.masks import MODES, ablate_heads, ablation_hooks, keep_mask, mask_hooks, mean_z
from ihprobe.models import provenance
from ihprobe.probes.battery import scan
from ihprobe.probes.engine import (
    ABLATION_METRICS,
    HEAD_METRICS,
    METRIC_TABLE,
    AblationMetric,
    Probe,
    reads_text,
    recall_probe,
    run_probe,
    text_probe,
    text_rows,
)
from ihprobe.probes.recall import icl_positions
from ihprobe.tasks import task_probes

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

__all__ = ["AblationResult", "METRICS", "ablate", "ablate_heads", "ablation_hooks", "head_sets"]

log = logging.getLogger(__name__)

METRICS = ABLATION_METRICS
TEXT_METRICS = tuple(m for m in METRICS if METRIC_TABLE[m].family == "text")
TASK_METRICS = tuple(m for m in METRICS if METRIC_TABLE[m].family == "tasks")
TEXT_LENGTH = 512  # tokens per natural-text row (enough for Olsson's tokens 50 and 500)
# Logits held at once, which bounds each chunk of stacked rows. On CPU, time is linear in rows
# once a pass holds a few rows, but one-row passes cost ~3x per row (benchmarks/bench_scale.py):
# 128 MB still gives Pythia's 50k vocabulary 13 rows of 50 queries a pass, while small models
# stay at MAX_TOKENS; an accelerator wants large chunks to fill its parallel units (1 GB).
MAX_LOGITS = {"cpu": 2**25, "accelerator": 2**28}
MAX_TOKENS = {"cpu": 2**13, "accelerator": 2**18}  # tokens per chunk when few logits are read


@torch.inference_mode()
def evaluate_groups(
    model: TransformerLensModel,
    probe: Probe,
    keeps: Float[torch.Tensor, "group layer head"],
    replacement: Float[torch.Tensor, "layer head d_head"] | None,
    *,
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
    n_rows, n_pos = probe.tokens.shape
    where = "cpu" if torch.device(model.cfg.device).type == "cpu" else "accelerator"
    max_logits = max_logits or MAX_LOGITS[where]
    chunk = min(max_logits // (probe.read * model.cfg.d_vocab), MAX_TOKENS[where] // n_pos)
    chunk = max(1, min(len(keeps) * n_rows, chunk))

    def masks(index, store):
        return mask_hooks(keeps[index // n_rows], replacement)

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
    tokens = text_rows(model, text, rows=rows, length=min(model.cfg.n_ctx, TEXT_LENGTH))
    early, late = icl_positions(tokens.shape[1])
    return text_probe(tokens, early, late, natural_loss=natural_loss)


def repeated_probe(
    model: TransformerLensModel, *, n: int | None, batch: int, seed: int, bos: bool
) -> Probe:
    """AR accuracy, AR mean rank and induction loss on [A]'s repeated random tokens of ``seed``."""
    tokens = repeated_tokens(model, n=n, batch=batch, seed=seed, bos=bos)
    return recall_probe(model, tokens, (tokens.shape[1] - int(bos)) // 2, bos)


# ----------------------------------------------------------------------------- ablate


def ablate(
    model: TransformerLensModel,
    *,
    by: str = "prefix_matching",
    top: float = 0.02,
    random: int = 20,
    mode: str = "mean",
    metrics: Sequence[AblationMetric] | None = None,
    seed: int = 0,
    scores: Float[torch.Tensor, "layer head"] | None = None,
    n: int | None = None,
    batch: int = 100,
    bos: bool = False,
    text: str | Sequence[str] | None = None,
    text_rows: int = 32,
    tasks: Sequence | None = None,
    reference: Int[torch.Tensor, "batch pos"] | None = None,
) -> AblationResult:
    """Ablate the top heads of every layer and compare with random heads (SPEC section 4).

    Args:
        model: a hooked model (``ihprobe.load``).
        by: the head score that ranks heads (any per-head metric of ``ihprobe.scan``).
        top: fraction of heads per layer; ``k_l = max(1, ceil(top * n_heads))``.
        random: number of random draws of ``k_l`` non-top heads per layer.
        mode: ``"mean"`` (a head's z is replaced by its mean) or ``"zero"``.
        metrics: subset of ``METRICS``; default all that the model can run (text and task
            metrics need a tokenizer that reads text).
        seed: seeds the probe inputs and the random draws; same seed, same result. Heads
            are ranked on the repeated tokens of ``seed`` and the metrics are measured on
            those of ``seed + 1``, so the top set is not chosen on the rows that judge it.
        scores: ``[layer, head]`` scores to rank by instead of running ``scan``.
        n, batch, bos: the repeated-token probe (as in ``ihprobe.scan``).
        text: natural text for ``icl_score`` and ``natural_loss`` (default: ihprobe's corpus).
        text_rows: rows of natural text.
        tasks: function-style tasks for HITS@k (``ihprobe.tasks``; default: the built-in ones).
        reference: tokens whose per-head mean z replaces ablated heads in every probe. By
            default each probe's own evaluation rows are the reference, so a head is replaced
            by its average output on the same data the metric is measured on.

    Returns:
        An :class:`AblationResult`.

    Raises:
        IhprobeError: ``top`` outside (0, 1], ``random < 1``, an unknown score or metric.

    Example:
        >>> result = ablate(model, random=20, metrics=["ar_accuracy", "induction_loss"])
        ... # doctest: +SKIP
        >>> result.summary().set_index("metric").loc["induction_loss", "p_value"]  # doctest: +SKIP
    """
    check_settings(top=top, random=random, mode=mode, metrics=metrics)
    heads_per_layer(model.cfg.n_heads, top)
    wanted = _metrics(model, metrics)
    scores = _scores(model, by, scores, n=n, batch=batch, seed=seed, bos=bos)
    top_set, random_sets = head_sets(scores, top=top, random=random, seed=seed)
    keeps = torch.stack(
        [keep_mask(model, [])] + [keep_mask(model, s) for s in [top_set, *random_sets]]
    )  # [group, layer, head]: clean, top, random draws
    probes = _probes(
        model, wanted, n=n, batch=batch, seed=seed, bos=bos, text=text, rows=text_rows, tasks=tasks
    )
    shared = None if reference is None or mode == "zero" else mean_z(model, reference)
    values: dict[str, torch.Tensor] = {}
    per_task: dict[str, torch.Tensor] = {}
    for probe in probes:
        replacement = None
        if mode == "mean":
            replacement = (
                shared if shared is not None else mean_z(model, probe.tokens, valid=probe.valid)
            )
        found = evaluate_groups(model, probe, keeps, replacement)
        if probe.task:
            per_task.update({f"{k}:{probe.name}": v for k, v in found.items()})
        else:
            values.update(found)
    for k in TASK_METRICS if per_task else ():  # every task weighs the same in the average
        values[k] = torch.stack([v for t, v in per_task.items() if t.startswith(k + ":")]).mean(0)
    ordered = {m: values[m] for m in wanted}
    ordered.update({k: v for k, v in per_task.items() if k.split(":")[0] in wanted})
    return AblationResult(
        provenance=provenance(model),
        by=by,
        scores=scores,
        top_heads=top_set,
        random_heads=random_sets,
        values=ordered,
        settings={
            "by": by,
            "top": top,
            "random": random,
            "mode": mode,
            "seed": seed,
            "n": n,
            "batch": batch,
            "bos": bos,
            "heads_per_layer": heads_per_layer(model.cfg.n_heads, top),
            "reference": "given" if reference is not None else "each probe's own rows",
            "probes": {p.name: list(p.tokens.shape) for p in probes},  # rows, positions
        },
    )


def check_settings(
    *, top: float, random: int, mode: str, metrics: Sequence[str] | None = None
) -> None:
    """Raise :class:`IhprobeError` for settings ``ablate`` cannot run, before any model work.

    >>> check_settings(top=0.02, random=20, mode="mean")
    """
    heads_per_layer(1, top)
    check_random(random)
    if mode not in MODES:
        raise IhprobeError(f"mode={mode!r} is not one of {MODES}.")
    if metrics is not None:
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise IhprobeError(f"unknown metric(s) {unknown}; choose from {list(METRICS)}.")
        if not metrics:
            raise IhprobeError(f"metrics is empty; choose some of {list(METRICS)}.")


def _metrics(model, metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        text_ok = reads_text(getattr(model, "tokenizer", None))
        if not text_ok:
            log.info("no text tokenizer: natural-text and task metrics are left out")
        return [m for m in METRICS if text_ok or m not in TEXT_METRICS + TASK_METRICS]
    return list(dict.fromkeys(metrics))


def _scores(model, by, scores, **scan_kwargs) -> torch.Tensor:
    cfg = model.cfg
    if scores is not None:
        scores = torch.as_tensor(scores)
        if tuple(scores.shape) != (cfg.n_layers, cfg.n_heads):
            raise IhprobeError(
                f"scores have shape {tuple(scores.shape)}; expected ({cfg.n_layers}, "
                f"{cfg.n_heads}) = (layer, head)."
            )
        return scores.detach().float().cpu()
    if by not in HEAD_METRICS:
        raise IhprobeError(f"unknown head score by={by!r}; choose one of {list(HEAD_METRICS)}.")
    return scan(model, metrics=[by], **scan_kwargs).head[by].detach().float().cpu()


def _probes(model, wanted, *, n, batch, seed, bos, text, rows, tasks) -> list[Probe]:
    probes = []
    if any(m in wanted for m in ("ar_accuracy", "ar_mean_rank", "induction_loss")):
        # fresh rows: heads are ranked on scan's batch (seed), metrics measured on another
        probes.append(repeated_probe(model, n=n, batch=batch, seed=seed + 1, bos=bos))
    if any(m in wanted for m in TEXT_METRICS):
        probes.append(natural_probe(model, text, rows=rows, natural_loss="natural_loss" in wanted))
    if any(m in wanted for m in TASK_METRICS):
        probes += task_probes(model, tasks, seed=seed)
    return probes
