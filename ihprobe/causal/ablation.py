"""Causal ablation: does the model depend on its top-scoring heads more than on random ones?

SPEC section 4 ([B]): score every head (prefix matching by default), switch off the top heads
(per layer, [B]'s protocol, or over the whole model: :mod:`ihprobe.causal.head_sets`), and
compare each
ICL metric's change with the changes of ``random`` baseline draws of other heads. A circuit that
is merely visible (a *signature*) scores high but costs little when removed; a *load-bearing*
one costs far more than random heads (:mod:`ihprobe.causal.results` for the statistics).
:func:`head_effects` ablates every head alone.

All groups are evaluated together: the same evaluation rows are stacked once per group (clean,
top, then the random draws), each group with its own ``[layer, head]`` keep-mask applied in the
``hook_z`` hooks (:mod:`ihprobe.causal.masks`), and the stacked batch runs in memory-bounded chunks.

>>> result = ihprobe.ablate(model, by="prefix_matching", top=0.02, random=20)   # doctest: +SKIP
>>> result.summary()[["metric", "change", "p_value", "load_bearing_index"]]     # doctest: +SKIP
>>> drop_figure(result).show()          # ihprobe.figures.ablation          # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import torch
from einops import rearrange
from jaxtyping import Float, Int

from ihprobe.causal.choices import BASELINES, MODES, SCOPES, Baseline, Mode, Scope
from ihprobe.causal.head_sets import (
    baseline_sets,
    check_choice,
    check_random,
    head_sets,
    heads_per_layer,
    top_set,
)
from ihprobe.causal.masks import (
    ablate_heads,
    ablation_hooks,
    derangement,
    hold_patterns,
    keep_mask,
    mask_hooks,
    mean_z,
)
from ihprobe.causal.results import AblationResult, HeadEffects
from ihprobe.causal.tasks import task_probes
from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.io.models import provenance
from ihprobe.probes.battery import scan
from ihprobe.probes.engine import (
    ABLATION_METRICS,
    HEAD_METRICS,
    METRIC_TABLE,
    Probe,
    budget_rows,
    reads_text,
    recall_probe,
    run_probe,
    text_probe,
    text_rows,
)
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.recall import icl_positions
from ihprobe.probes.record import activations

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = [
    "AblationResult", "HeadEffects", "METRICS", "ablate", "ablate_heads", "ablation_hooks",
    "head_effects", "head_sets",
]  # fmt: skip

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
    top: float | int = 0.02,
    scope: Scope = "layer",
    random: int = 20,
    baseline: Baseline = "layer-matched",
    mode: Mode = "mean",
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    scores: Float[torch.Tensor, "layer head"] | None = None,
    match: Float[torch.Tensor, "layer head"] | None = None,
    n: int | None = None,
    batch: int = 100,
    bos: bool = False,
    text: str | Sequence[str] | None = None,
    text_rows: int = 32,
    tasks: Sequence | None = None,
    reference: Int[torch.Tensor, "batch pos"] | None = None,
) -> AblationResult:
    """Ablate the top heads and compare with random baseline heads (SPEC section 4).

    Args:
        model: a hooked model (``ihprobe.load``).
        by: the head score that ranks heads (any per-head metric of ``ihprobe.scan``).
        top: a fraction in (0, 1] (``max(1, ceil(top * heads))``) or a count k >= 1 of heads.
        scope: ``"layer"`` takes ``top`` of every layer ([B]'s protocol); ``"global"`` of the
            whole model.
        random: number of baseline draws.
        baseline: ``"layer-matched"`` (as many heads per layer as the top set), ``"global"``
            (as many in total) or ``"score-matched"`` (one head of similar score per top head);
            see :mod:`ihprobe.causal.head_sets`.
        mode: what an ablated head outputs: ``"mean"`` (its mean z), ``"zero"``,
            ``"resample"`` (its z on another row) or ``"pattern"`` (mean, with every head's
            attention pattern held at its clean value: direct effects only).
        metrics: subset of ``METRICS``; default all that the model can run (text and task
            metrics need a tokenizer that reads text).
        seed: seeds the probe inputs and the random draws; same seed, same result. Heads
            are ranked on the repeated tokens of ``seed`` and the metrics are measured on
            those of ``seed + 1``, so the top set is not chosen on the rows that judge it.
        scores: ``[layer, head]`` scores to rank by instead of running ``scan``.
        match: ``[layer, head]`` scores a score-matched baseline matches on (default: the
            ranking scores), e.g. attention entropy.
        n, batch, bos: the repeated-token probe (as in ``ihprobe.scan``).
        text: natural text for ``icl_score`` and ``natural_loss`` (default: ihprobe's corpus).
        text_rows: rows of natural text.
        tasks: function-style tasks for HITS@k (``ihprobe.causal.tasks``; default: the built-in
        ones).
        reference: tokens whose per-head mean z replaces ablated heads in every probe. By
            default each probe's own evaluation rows are the reference, so a head is replaced
            by its average output on the same data the metric is measured on.

    Returns:
        An :class:`AblationResult`; its ``summary()`` holds p-values and the load-bearing index.

    Raises:
        IhprobeError: a bad ``top``, ``scope``, ``baseline`` or ``mode``, ``random < 1``, an
            unknown score or metric.

    Example:
        >>> result = ablate(model, scope="global", top=1, metrics=["ar_accuracy"])
        ... # doctest: +SKIP
        >>> summary = result.summary().set_index("metric")              # doctest: +SKIP
        >>> summary.loc["ar_accuracy", ["p_value", "load_bearing_index"]]  # doctest: +SKIP
    """
    checks.arguments(model=model, random=random, seed=seed, n=n, batch=batch, bos=bos,
                     text_rows=text_rows, reference=reference)  # fmt: skip
    check_settings(top=top, random=random, mode=mode, metrics=metrics, scope=scope,
                   baseline=baseline)  # fmt: skip
    wanted = _metrics(model, metrics)
    scores = _scores(model, by, scores, n=n, batch=batch, seed=seed, bos=bos)
    chosen = top_set(scores, top=top, scope=scope)
    draws = baseline_sets(scores, chosen, baseline=baseline, random=random, seed=seed, match=match)
    keeps = torch.stack([keep_mask(model, heads) for heads in [[], chosen, *draws.draws]])
    probes = _probes(
        model, wanted, n=n, batch=batch, seed=seed, bos=bos, text=text, rows=text_rows, tasks=tasks
    )
    values = _evaluate(model, probes, keeps, wanted, mode=mode, reference=reference, seed=seed)
    settings = {
        "by": by, "top": top, "scope": scope, "random": random, "baseline": baseline,
        "mode": mode, "seed": seed, "n": n, "batch": batch, "bos": bos,
        "top_count": len(chosen), "distinct_sets": draws.distinct, "draws_repeat": draws.repeats,
        "reference": "given" if reference is not None else "each probe's own rows",
        "probes": {p.name: list(p.tokens.shape) for p in probes},  # rows, positions
    }  # fmt: skip
    if scope == "layer":
        settings["heads_per_layer"] = heads_per_layer(model.cfg.n_heads, top)
    if draws.repeats:
        note = (f"only {draws.distinct} distinct {baseline} baseline sets exist, so the "
                f"{random} draws repeat them; p_distinct counts each set once")  # fmt: skip
        settings["notes"] = [note]
        log.info(note)
    return AblationResult(provenance(model), by, scores, chosen, draws.draws, values, settings)


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


ROW_DEFAULTS: EvaluationRows = {
    "seed": 0, "n": None, "batch": 100, "bos": False, "text": None, "text_rows": 32,
    "tasks": None, "reference": None,
}  # fmt: skip


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
    (``benchmarks/RESULTS_ablation.md``).

    Example:
        >>> effects = head_effects(model, ["ar_accuracy", "induction_loss"])   # doctest: +SKIP
        >>> effects.ranking("ar_accuracy")[0]                                 # doctest: +SKIP
        (1, 2, 0.93)
        >>> effects.to_frame()          # layer, head, metric, clean, ablated, change, ...
        ... # doctest: +SKIP
    """
    unknown = set(rows) - set(ROW_DEFAULTS)
    if unknown:
        raise TypeError(f"head_effects() got unexpected keyword arguments {sorted(unknown)}")
    s = {**ROW_DEFAULTS, **rows}
    checks.arguments(model=model, **{k: v for k, v in s.items() if k not in ("text", "tasks")})
    check_settings(top=1, random=1, mode=mode, metrics=metrics)
    wanted = _metrics(model, metrics)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    keeps = torch.ones(1 + n_layers * n_heads, n_layers * n_heads)
    keeps[1:].fill_diagonal_(0.0)  # group 1 + i ablates head i (layer-major)
    keeps = rearrange(keeps, "group (layer head) -> group layer head", layer=n_layers)
    probes = _probes(
        model, wanted, n=s["n"], batch=s["batch"], seed=s["seed"], bos=s["bos"], text=s["text"],
        rows=s["text_rows"], tasks=s["tasks"],
    )  # fmt: skip
    values = _evaluate(
        model, probes, keeps, wanted, mode=mode, reference=s["reference"], seed=s["seed"]
    )
    settings = {"mode": mode, **{k: s[k] for k in ("seed", "n", "batch", "bos")},
                "probes": {p.name: list(p.tokens.shape) for p in probes}}  # fmt: skip
    return HeadEffects(provenance(model), (n_layers, n_heads), values, settings)


def _evaluate(model, probes, keeps, wanted, *, mode, reference, seed) -> dict[str, torch.Tensor]:
    """Every wanted metric for every group of ``keeps``; task metrics averaged over tasks."""
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
        return z[derangement(len(z), seed)], None
    mean = shared if shared is not None else mean_z(model, probe.tokens, valid=probe.valid)
    if mode == "mean":
        return mean, None
    return mean, activations(model, probe, ("pattern",))["pattern"]


def check_settings(
    *,
    top: float | int,
    random: int,
    mode: str,
    metrics: Sequence[str] | None = None,
    scope: str = "layer",
    baseline: str = "layer-matched",
) -> None:
    """Raise :class:`IhprobeError` for settings ``ablate`` cannot run, before any model work.

    >>> check_settings(top=0.02, random=20, mode="mean")
    """
    heads_per_layer(1, top)
    check_random(random)
    check_choice("mode", mode, MODES)
    check_choice("scope", scope, SCOPES)
    check_choice("baseline", baseline, BASELINES)
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
        return checks.matrix("scores", scores.detach().cpu() if torch.is_tensor(scores) else scores,
                             (cfg.n_layers, cfg.n_heads))  # fmt: skip
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
