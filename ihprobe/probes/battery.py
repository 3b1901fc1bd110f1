"""``scan``: every head score and model score of a model, one forward pass per input family.

Input families and what each gives (``docs/science.md`` defines every score):

* repeated random tokens ``[s, s]`` -- one pass with hooks that keep, per layer, the attention
  at the (query, key) pairs of the pattern scores (``[batch, head, pair]``), ``hook_z`` at the
  ``n`` second-half queries, and ``ln_final.hook_scale`` there; only those queries are
  unembedded, and their logits give the recall scores. Nothing else of the pass is kept (no
  ``run_with_cache``; :mod:`ihprobe.probes.repeated`).
* Bi-Induct snippets (:mod:`ihprobe.probes.snippets`) -- forward ``[S, SEP, S]`` and backward
  ``[S, SEP, reverse(S)]`` rows of one length ([B]'s protocol) in one pass, attention pairs
  only; rows whose length varies (forward, backward and a shuffled control) in another, with
  the logits of the copies when a backward-copying behaviour score is asked for.
* weights -- the OV copying score, no pass at all; ``k_composition`` (the strongest
  K-composition from a previous-token head, :mod:`ihprobe.probes.composition`) from the
  weights and the repeated pass's previous-token scores.
* natural text, when given -- one plain pass for the ICL score.
* few-shot task prompts, only when ``fv`` is named -- the function-vector score, computed by
  :func:`ihprobe.fv_scores` (registered in :mod:`ihprobe.probes.provided`).

A family whose metrics were not asked for is not run. How prefix matching and duplicate-token
scores relate to TransformerLens ``detect_head`` is spelled out in
:mod:`ihprobe.probes.attention` (``detect_head = score * n / T`` with ``error_measure="mul"``).

>>> scores = scan(model)                                                   # doctest: +SKIP
>>> scores.top_heads("prefix_matching", 3)                                 # doctest: +SKIP
>>> scan(model, ["prefix_matching", "ar_accuracy"], n=32, batch=50).model  # doctest: +SKIP
{'ar_accuracy': 0.97}
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from jaxtyping import Int

from ihprobe.core import calls
from ihprobe.io.any_model import as_model
from ihprobe.io.attention import choose_attention
from ihprobe.io.models import provenance
from ihprobe.io.validation import check_scores
from ihprobe.probes import copying, inputs, recall, snippets
from ihprobe.probes.composition import previous_token_composition
from ihprobe.probes.engine import DEFAULT_CHUNK, run_probe, text_probe, token_rows
from ihprobe.probes.metrics import HEAD_METRICS, METRIC_TABLE, SCAN_METRICS, check_metrics
from ihprobe.probes.provided import provided
from ihprobe.probes.repeated import Z_METRICS, repeated_pass, repeated_rows
from ihprobe.probes.scores import HeadScores

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

log = logging.getLogger(__name__)

METRICS = SCAN_METRICS
TASK_METRICS = tuple(m for m in HEAD_METRICS if METRIC_TABLE[m].family == "tasks")  # fv


def scan(
    model: TransformerLensModel,
    metrics: Sequence[str] | str | None = None,
    *,
    n: int | None = None,
    batch: int = 100,
    seed: int = 0,
    bos: bool = False,
    tokens: Int[torch.Tensor, "batch pos"] | None = None,
    text: str | Sequence[str] | Int[torch.Tensor, "batch pos"] | None = None,
    snippet_length: int | None = None,
    snippet_lengths: tuple[int, int] | None = None,
    chunk: int | None = DEFAULT_CHUNK,
    attention: str = "auto",
    tasks: Sequence | None = None,
) -> HeadScores:
    """Score every head and the model on the probe inputs: head scores and model-level scores.
    (Over 60 lines: the docstring documents every metric family and argument.)

    Args:
        model: a hooked model from :func:`ihprobe.load` (any TransformerLens model with the
            standard hook names and ``W_E, W_V, W_O, W_U``).
        metrics: names from :data:`METRICS`; None for all but ``fv`` (``icl_score`` only with
            ``text``). ``fv``, computed only when named, is :func:`ihprobe.fv_scores`' score
            at its defaults (10 shots, 25 prompts per task) with ``tasks`` and ``seed``: 0 at
            chance; skipped, with a note, for a model without a tokenizer that reads text or
            one that does no task above chance (then no head has a score).
        n: half-length of the repeated random tokens; default ``min(50, n_ctx // 2)``.
        batch: rows of repeated tokens, and of each snippet direction.
        seed: seeds every random probe input.
        bos: prepend the tokenizer's BOS to the probe rows.
        tokens: your own repeated sequences ``[batch, 2n]`` (``[batch, 2n + 1]`` with ``bos``)
            instead of random ones; the second half must repeat the first.
        text: natural text for the ICL score -- a string, a list of documents, or token ids
            ``[rows, pos]``; cut into up to ``batch`` rows.
        snippet_length: ``|S|`` of the fixed-length snippets ([B]'s protocol:
            ``forward_induction_fixed``, ``anti_induction``); default 20, less when the
            context is short.
        snippet_lengths: ``(shortest, longest)`` ``|S|`` of the varied-length snippets (the
            other snippet scores), drawn per row; default 10-30, less when the context is short.
        chunk: rows per forward pass (default 25); None runs each input family's rows in one
            pass. Chunks bound memory (every score is a mean over rows, so the numbers do not
            change): 48x less peak memory than ``run_with_cache`` at batch 100, and, like one
            pass, within 1.3x of a bare forward on a CPU (``lab/benchmarks/RESULTS_probes.md``);
            on an accelerator larger chunks or None can be a little faster.
        attention: how the attention scores are read: ``"pairs"`` computes only the (query,
            key) pairs they read from the queries and keys, with SDPA attention
            (``docs/fast-scores.md``); ``"patterns"`` reads them from the full patterns;
            ``"auto"`` (default) takes pairs where the architecture allows
            (:func:`ihprobe.io.attention.fast_path_reason`); the two agree within 1e-5.
        tasks: ``fv``'s tasks (``Task`` objects or task files, as ``ablate --task`` reads);
            None: the built-in and word tasks.

    Returns:
        :class:`~ihprobe.probes.scores.HeadScores` with provenance and settings.

    Raises:
        IhprobeError: an unknown metric (the message lists the valid ones), ``n`` too long for
            the context (it gives the largest that fits), a vocabulary smaller than ``n``,
            ``tokens`` whose halves differ, or text too short for the ICL positions.

    Example:
        >>> scores = scan(model, n=32, batch=50, seed=1)                   # doctest: +SKIP
        >>> scores.top_heads("prefix_matching", k=3)                       # doctest: +SKIP
    """
    model = as_model(model)
    requested = check_metrics(metrics)
    sites = ("z",) if any(m in Z_METRICS for m in requested) else ()
    mode, why = choose_attention(model, attention, sites)
    calls.arguments(
        model=model,
        n=n,
        batch=batch,
        seed=seed,
        bos=bos,
        chunk=chunk,
        snippet_length=snippet_length,
        text=text,
        patterns=mode == "patterns",
    )
    wanted = [m for m in requested if m != "icl_score" or text is not None]
    settings: dict = {
        "metrics": wanted,
        "batch": batch,
        "seed": seed,
        "bos": bos,
        "notes": [],
        "d_vocab": model.cfg.d_vocab,
        "attention": mode,
    }
    if "icl_score" in requested and text is None:
        note = "icl_score skipped: pass natural text (text=..., or --text FILE) to compute it"
        settings["notes"].append(note)
        log.info(note)
    if attention == "auto" and why is not None:
        settings["notes"].append(f"attention read from full patterns: {why}")
    head: dict[str, torch.Tensor] = {}
    model_scores: dict[str, float] = {}
    with torch.no_grad():
        if any(METRIC_TABLE[m].family == "repeated" for m in wanted):
            rows, n = repeated_rows(model, tokens, n=n, batch=batch, seed=seed, bos=bos)
            settings.update(n=n, tokens="given" if tokens is not None else "random")
            needs_previous = ["previous_token"] * ("k_composition" in wanted)
            head_part, model_part = repeated_pass(
                model, rows, n, bos, wanted + needs_previous, chunk, mode
            )
            head.update(head_part)
            model_scores.update(model_part)
        if any(METRIC_TABLE[m].family == "snippets" for m in wanted):
            length = snippet_length or min(
                inputs.SNIPPET_LENGTH, (model.cfg.n_ctx - 1 - int(bos)) // 2
            )
            lengths = snippet_lengths or default_lengths(model.cfg.n_ctx, bos)
            settings.update(snippet_length=length, snippet_lengths=list(lengths))
            head_part, model_part = snippets.snippet_scores(
                model,
                wanted,
                length=length,
                lengths=lengths,
                batch=batch,
                seed=seed,
                bos=bos,
                chunk=chunk,
                mode=mode,
            )
            head.update(head_part)
            model_scores.update(model_part)
        if "copying" in wanted:
            head["copying"] = copying.copying_scores(model)
        if "k_composition" in wanted:
            head["k_composition"] = previous_token_composition(model, head["previous_token"])
        if "icl_score" in wanted:
            early, late = recall.icl_positions(model.cfg.n_ctx)
            rows = token_rows(model, text, rows=batch, length=late + 1)
            settings.update(icl_positions=[early, late], icl_rows=len(rows))
            per_row = run_probe(model, text_probe(rows, early, late), chunk=chunk, attention=mode)
            model_scores["icl_score"] = float(per_row["icl_score"].mean())
    for metric in [m for m in wanted if m in TASK_METRICS]:  # computed by a higher layer
        found = provided(model, metric, {"tasks": tasks, "seed": seed})
        settings.update(found.settings)
        if found.scores is None:
            settings["notes"].append(found.note)
            wanted.remove(metric)
        else:
            head[metric] = found.scores
    ordered_head = {k: head[k].float().cpu() for k in METRICS if k in head and k in wanted}
    ordered_model = {k: model_scores[k] for k in METRICS if k in model_scores}
    check_scores(ordered_head, ordered_model)  # a NaN/inf score is an error naming the metric
    return HeadScores(ordered_head, ordered_model, provenance(model), settings)


def default_lengths(n_ctx: int, bos: bool = False) -> tuple[int, int]:
    """The varied snippet lengths: ``inputs.VARIED_LENGTHS``, cut to fit the context.

    >>> default_lengths(128), default_lengths(41)
    ((10, 30), (10, 20))
    """
    longest = min(inputs.VARIED_LENGTHS[1], (n_ctx - 1 - int(bos)) // 2)
    return min(inputs.VARIED_LENGTHS[0], longest), longest
