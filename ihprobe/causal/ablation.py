"""Causal ablation: does the model depend on its top-scoring heads more than on random ones?

[B]'s test (``docs/science.md``): score every head (prefix matching by default), switch off the
top heads (by default the model's 3 highest, as ``ihprobe ablate`` and the demo; per layer,
[B]'s protocol, with ``scope="layer", top=0.02``: :mod:`ihprobe.causal.head_sets`), and compare
each ICL metric's change with the changes of ``draws`` random baseline draws of other heads.
A circuit that is merely visible (a *signature*) scores high but costs little when removed; a
*load-bearing* one costs far more than random heads (:mod:`ihprobe.causal.results`).
:func:`~ihprobe.causal.per_head.head_effects` ablates every head alone.

All groups are evaluated together, in a few stacked forward passes
(:mod:`ihprobe.causal.evaluation`).

>>> result = ihprobe.ablate(model, by="prefix_matching", draws=20)              # doctest: +SKIP
>>> result.summary()[["metric", "change", "p_value", "load_bearing_index"]]     # doctest: +SKIP
>>> drop_figure(result).show()          # ihprobe.figures.ablation          # doctest: +SKIP
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int

from ihprobe.causal import choices
from ihprobe.causal.choices import BASELINES, MODES, SCOPES, Baseline, Mode, Scope
from ihprobe.causal.evaluation import METRICS, evaluate, metrics_for, probes_for
from ihprobe.causal.fv import fv_ranking
from ihprobe.causal.head_sets import (
    baseline_sets,
    check_choice,
    check_random,
    excluding,
    heads_per_layer,
    top_set,
    without_signature,
)
from ihprobe.causal.masks import keep_mask
from ihprobe.causal.results import AblationResult
from ihprobe.core import calls, checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.heads import heads_of
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance
from ihprobe.probes.battery import scan
from ihprobe.probes.inputs import SNIPPET_LENGTH, default_n
from ihprobe.probes.metrics import HEAD_METRICS, METRIC_TABLE

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

__all__ = ["METRICS", "ablate", "check_settings"]

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- ablate


DRAWS = 20  # random baseline draws by default ([B]'s)


def draw_count(draws, random) -> int:
    """The number of random draws from ``draws`` or its old name ``random`` (deprecated; None
    when not given).

    >>> draw_count(20, None), draw_count(5, None), draw_count(20, 7)
    (20, 5, 7)
    """
    if random is None:
        return draws
    if draws != DRAWS:
        raise IhprobeError("pass draws=... alone: random=... is its old name.")
    warnings.warn("random= is now draws= (as the CLI's --draws)", DeprecationWarning, 3)
    return random


def ablate(
    model: TransformerLensModel,
    *,
    by: str = "prefix_matching",
    top: float | int = choices.DEFAULT_TOP,
    heads: Sequence[tuple[int, int] | str] | None = None,
    scope: Scope = choices.DEFAULT_SCOPE,
    draws: int = 20,
    baseline: Baseline = choices.DEFAULT_BASELINE,
    mode: Mode = "mean",
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    scores: Float[torch.Tensor, "layer head"] | None = None,
    exclude: str | None = None,
    match: Float[torch.Tensor, "layer head"] | None = None,
    n: int | None = None,
    batch: int = 100,
    bos: bool = False,
    text: str | Sequence[str] | None = None,
    text_rows: int = 32,
    tasks: Sequence | None = None,
    reference: Int[torch.Tensor, "batch pos"] | None = None,
    random: int | None = None,
) -> AblationResult:
    """Ablate the top heads and compare with random baseline heads.

    Args:
        model: a hooked model (``ihprobe.load``).
        by: the head score that ranks heads (any per-head metric of ``ihprobe.scan``, or
            ``"fv"``: :func:`ihprobe.fv_scores` on ``tasks`` with ``seed``).
        top: a fraction in (0, 1] (``max(1, ceil(top * heads))``) or a count k >= 1 of heads;
            the default, 3 over the whole model, is ``ihprobe ablate``'s and the demo's.
        heads: the heads to test instead of a top set (``[(1, 3)]``, ``["L1H3"]`` or
            ``["1.3"]``); ``top`` and ``scope`` are then unused, and ``by`` still scores every
            head (the verdict and a score-matched baseline read it).
        scope: ``"global"`` (the default) takes ``top`` of the whole model; ``"layer"`` of
            every layer ([B]'s protocol: ``scope="layer", top=0.02``).
        draws: number of random baseline draws ([B]'s 20; the CLI's ``--draws``).
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
        exclude: another head score (e.g. ``"prefix_matching"`` when ``by="fv"``) whose top set
            is dropped from the candidates first: Yin & Steinhardt's exclusion ablation.
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
        random: the old name of ``draws``, still taken (a DeprecationWarning).

    Returns:
        An :class:`AblationResult`; its ``summary()`` holds p-values and the load-bearing index.

    (Over 60 lines only by these argument notes; the body is about 35 lines.)

    Raises:
        IhprobeError: a bad ``top``, ``scope``, ``baseline`` or ``mode``, ``random < 1``, an
            unknown score or metric.

    Example:
        >>> result = ablate(model, metrics=["ar_accuracy"])    # the model's top 3 heads
        ... # doctest: +SKIP
        >>> per_layer = ablate(model, scope="layer", top=0.02)  # [B]'s protocol
        ... # doctest: +SKIP
        >>> mine = ablate(model, heads=["L1H3"], draws=20)       # a head you picked
        ... # doctest: +SKIP
        >>> summary = result.summary().set_index("metric")              # doctest: +SKIP
        >>> summary.loc["ar_accuracy", ["p_value", "load_bearing_index"]]  # doctest: +SKIP
    """
    model = as_model(model)
    random = checks.count("draws", draw_count(draws, random))  # estimated below as groups
    calls.arguments(
        model=model,
        random=random,
        patterns=False,  # its passes keep no layer's pattern past that layer
        seed=seed,
        n=n,
        batch=batch,
        bos=bos,
        text_rows=text_rows,
        reference=reference,
    )
    check_settings(
        top=top, random=random, mode=mode, metrics=metrics, scope=scope, baseline=baseline
    )
    wanted = metrics_for(model, metrics)
    rank = {"n": n, "batch": batch, "seed": seed, "bos": bos, "tasks": tasks}
    scores = _scores(model, by, scores, **rank)
    if exclude is not None:
        scores = excluding(scores, _scores(model, exclude, None, **rank), top=top, scope=scope)
    if match is not None:
        match = _scores(model, by, match, name="match")
    chosen = top_set(scores, top=top, scope=scope) if heads is None else chosen_heads(model, heads)
    notes = []
    if heads is None:  # a top set never counts a head at chance as an induction head
        floor = 2 * chance_of(model, by, n=n, bos=bos)
        formed = METRIC_TABLE[by].threshold if by in METRIC_TABLE else None
        chosen, notes = without_signature(scores, chosen, floor, scope=scope, by=by, formed=formed)
    draws = baseline_sets(scores, chosen, baseline=baseline, random=random, seed=seed, match=match)
    keeps = torch.stack([keep_mask(model, heads) for heads in [[], chosen, *draws.draws]])
    probes = probes_for(
        model, wanted, n=n, batch=batch, seed=seed, bos=bos, text=text, rows=text_rows, tasks=tasks
    )
    values = evaluate(model, probes, keeps, wanted, mode=mode, reference=reference, seed=seed)
    settings = {
        "by": by,
        "exclude": exclude,
        "top": top if heads is None else "given",
        "scope": scope,
        "random": random,
        "baseline": baseline,
        "mode": mode,
        "seed": seed,
        "n": n,
        "batch": batch,
        "bos": bos,
        "top_count": len(chosen),
        "distinct_sets": draws.distinct,
        "draws_repeat": draws.repeats,
        "reference": "given" if reference is not None else "each probe's own rows",
        "probes": {p.name: list(p.tokens.shape) for p in probes},  # rows, positions
    }
    if scope == "layer" and heads is None:
        settings["heads_per_layer"] = heads_per_layer(model.cfg.n_heads, top)
    if draws.repeats:
        notes.append(
            f"only {draws.distinct} distinct {baseline} baseline sets exist, so the "
            f"{random} draws repeat them; p_distinct counts each set once"
        )
    if notes:
        settings["notes"] = notes
        for note in notes:
            log.info(note)
    return AblationResult(provenance(model), by, scores, chosen, draws.draws, values, settings)


def chance_of(model, by: str, *, n: int | None, bos: bool) -> float:
    """The chance level of head score ``by`` on ``model``'s probe (the metric table's, at the
    probe's ``n`` or snippet length); 0 for a score the table gives none."""
    metric = METRIC_TABLE.get(by)
    if metric is None or metric.chance is None:
        return 0.0
    if metric.family == "snippets":
        length = SNIPPET_LENGTH
    else:
        length = n if n is not None else default_n(model.cfg.n_ctx - int(bos))
    return float(metric.chance(model.cfg.d_vocab, length))


def chosen_heads(model, heads) -> list[tuple[int, int]]:
    """The heads to test (``L1H3``, ``1.3`` or pairs), checked against the model, sorted, once
    each; the others must leave the baseline something to draw."""
    cfg = model.cfg
    found = sorted(set(heads_of(heads, "heads")))
    outside = [f"L{a}H{b}" for a, b in found if not (a < cfg.n_layers and b < cfg.n_heads)]
    if outside:
        raise IhprobeError(
            f"heads {', '.join(outside)} do not exist: the model has {cfg.n_layers} layers of "
            f"{cfg.n_heads} heads (L0H0 to L{cfg.n_layers - 1}H{cfg.n_heads - 1})."
        )
    if 2 * len(found) > cfg.n_layers * cfg.n_heads:
        raise IhprobeError(
            f"{len(found)} heads of {cfg.n_layers * cfg.n_heads} leave too few for the random "
            "baseline; test at most half of the heads."
        )
    return found


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


def _scores(model, by, scores, name: str = "scores", **scan_kwargs) -> torch.Tensor:
    cfg = model.cfg
    if scores is not None:
        return checks.matrix(
            name,
            scores.detach().cpu() if torch.is_tensor(scores) else scores,
            (cfg.n_layers, cfg.n_heads),
        )
    if by == "fv":
        return fv_ranking(model, scan_kwargs["tasks"], seed=scan_kwargs["seed"])
    scan_kwargs.pop("tasks", None)
    if by not in HEAD_METRICS:
        raise IhprobeError(f"unknown head score by={by!r}; choose one of {list(HEAD_METRICS)}.")
    return scan(model, metrics=[by], **scan_kwargs).head[by].detach().float().cpu()
