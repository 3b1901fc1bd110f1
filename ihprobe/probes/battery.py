"""``scan``: every head score and model score of a model, one forward pass per input family.

Input families and what each gives (``docs/science.md`` defines every score):

* repeated random tokens ``[s, s]`` -- one pass with hooks that keep, per layer, the attention
  at the (query, key) pairs of the pattern scores (``[batch, head, pair]``), ``hook_z`` at the
  ``n`` second-half queries, and ``ln_final.hook_scale`` there; only those queries are
  unembedded, and their logits give the recall scores. Nothing else of the pass is kept (no
  ``run_with_cache``).
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

from ihprobe.core import calls, checks, hooks
from ihprobe.core.devices import gathered, stack_layers
from ihprobe.core.errors import IhprobeError
from ihprobe.io.any_model import as_model
from ihprobe.io.attention import choose_attention
from ihprobe.io.models import provenance
from ihprobe.io.offload import readable
from ihprobe.io.validation import check_scores
from ihprobe.probes import attention, attribution, copying, inputs, recall, snippets
from ihprobe.probes.composition import previous_token_composition
from ihprobe.probes.engine import (
    DEFAULT_CHUNK,
    NOTHING,
    Probe,
    recall_probe,
    run_probe,
    text_probe,
    token_rows,
)
from ihprobe.probes.metrics import (
    HEAD_METRICS,
    METRIC_TABLE,
    PATTERN,
    SCALE,
    SCAN_METRICS,
    Z,
    check_metrics,
)
from ihprobe.probes.provided import provided
from ihprobe.probes.scores import HeadScores

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

log = logging.getLogger(__name__)

METRICS = SCAN_METRICS
MODEL_METRICS = tuple(m for m in METRICS if METRIC_TABLE[m].level == "model")
# which attention pairs of the repeated-token pass each metric reads
REPEATED_PATTERNS = {
    "prefix_matching": "prefix_matching",
    "prefix_matching_sd": "prefix_matching",
    "ps_la_correlation": "prefix_matching",
    "previous_token": "previous_token",
    "duplicate_token": "duplicate_token",
}
Z_METRICS = tuple(
    m for m in HEAD_METRICS if Z in METRIC_TABLE[m].hooks and METRIC_TABLE[m].family == "repeated"
)
TASK_METRICS = tuple(m for m in HEAD_METRICS if METRIC_TABLE[m].family == "tasks")  # fv
LOGIT_METRICS = tuple(m for m in MODEL_METRICS if METRIC_TABLE[m].family == "repeated")
NORM_CENTRES = {"LN": True, "LNPre": True, "RMS": False, "RMSPre": False}


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
            rows, n = _repeated_rows(model, tokens, n=n, batch=batch, seed=seed, bos=bos)
            settings.update(n=n, tokens="given" if tokens is not None else "random")
            needs_previous = ["previous_token"] * ("k_composition" in wanted)
            head_part, model_part = _repeated_pass(
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


def _repeated_rows(model, tokens, *, n, batch, seed, bos) -> tuple[torch.Tensor, int]:
    """The repeated-token rows: the caller's (validated) or random ones; and their ``n``."""
    if tokens is None:
        probe = inputs.repeated_tokens(model, n=n, batch=batch, seed=seed, bos=bos)
        return probe, (probe.shape[1] - int(bos)) // 2
    return check_repeated(model, tokens, n=n, bos=bos), (tokens.shape[1] - int(bos)) // 2


def check_repeated(
    model: TransformerLensModel,
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    n: int | None = None,
    bos: bool = False,
) -> Int[torch.Tensor, "batch pos"]:
    """Validate user repeated tokens ``[batch, 2n (+1)]``; return them on the model's device.

    Example:
        >>> check_repeated(model, torch.tensor([[5, 6, 5, 7]]))              # doctest: +SKIP
        IhprobeError: tokens must repeat: the second half of row 0 differs from the first ...
    """
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
        raise IhprobeError("tokens must be an integer tensor [batch, 2n] of repeated token ids.")
    length = tokens.shape[1] - int(bos)
    if length < 2 or length % 2:
        raise IhprobeError(
            f"tokens must hold two copies of the same sequence ([batch, 2n]{' after BOS' * bos});"
            f" got {length} positions{' after BOS' * bos}, an odd number or too few."
        )
    half = length // 2
    if n is not None and n != half:
        raise IhprobeError(f"n={n} but the tokens given hold 2 x {half}; pass n={half} or n=None.")
    if tokens.shape[1] > model.cfg.n_ctx:
        raise IhprobeError(
            f"tokens hold {tokens.shape[1]} positions but the model's context is "
            f"{model.cfg.n_ctx}; the largest n that fits is {(model.cfg.n_ctx - int(bos)) // 2}."
        )
    checks.tokens("tokens", tokens, model)  # empty, or ids outside the vocabulary
    first, second = tokens[:, int(bos) : int(bos) + half], tokens[:, int(bos) + half :]
    bad = (first != second).any(1).nonzero().flatten()
    if len(bad):
        raise IhprobeError(
            f"tokens must repeat: the second half of row {int(bad[0])} differs from the first "
            f"({len(bad)} rows differ). Pass rows [s_1..s_n, s_1..s_n]"
            f"{', after one BOS' * bos}, or tokens=None for random ones."
        )
    return tokens.to(model.cfg.device)


def _repeated_pass(model, rows, n: int, bos: bool, wanted: list[str], chunk, mode: str):
    """One pass over repeated tokens; every score of that family from small slices of it."""
    named = attention.repeated_pairs(n, bos)
    patterns = {
        name: named[name]
        for name in dict.fromkeys(REPEATED_PATTERNS[m] for m in wanted if m in REPEATED_PATTERNS)
    }
    pairs, where = attention.concat_pairs(patterns) if patterns else ((None, None), {})
    queries = recall.query_positions(n, bos)
    keep_z = any(m in Z_METRICS for m in wanted)
    keep_scale = "direct_logit_attribution" in wanted
    if any(m in LOGIT_METRICS for m in wanted):
        probe = recall_probe(model, rows, n, bos)
    else:  # unembed no position
        probe = Probe("repeated tokens", rows, positions=NOTHING)

    select_pairs = hooks.pattern_pairs(*pairs) if patterns else None
    at_queries = hooks.positions(queries)

    def make_hooks(index, store: dict) -> list:
        found = []
        for layer in range(model.cfg.n_layers):
            if patterns:
                keep = hooks.keep(store, ("pattern", layer), select_pairs)
                found.append((hooks.hook_name(PATTERN, layer), keep))
            if keep_z:
                found.append(
                    (hooks.hook_name(Z, layer), hooks.keep(store, ("z", layer), at_queries))
                )
        if keep_scale:
            found.append((hooks.hook_name(SCALE), hooks.keep(store, "scale", at_queries)))
        return found

    kept = run_probe(model, probe, make_hooks, chunk=chunk, attention=mode)
    head, per_pair = _pattern_scores(kept, patterns, where, wanted, model.cfg.n_layers)
    if keep_z:
        with readable(model):  # W_O, W_U and the final norm of a dispatched model
            head.update(_z_scores(model, kept, rows, n, bos, wanted, per_pair))
    if not any(m in LOGIT_METRICS for m in wanted):
        return head, {}
    per_row = torch.stack([kept[m] for m in LOGIT_METRICS], dim=1).mean(0)  # one reduction
    return head, {m: float(per_row[i]) for i, m in enumerate(LOGIT_METRICS) if m in wanted}


def _pattern_scores(kept, patterns, where, wanted, n_layers) -> tuple[dict, dict]:
    """Head scores from the kept attention pairs, and the pairs per score ``[l, b, h, pair]``."""
    if not patterns:
        return {}, {}
    stacked = stack_layers([kept[("pattern", layer)] for layer in range(n_layers)])
    per_pair = {name: stacked[..., where[name]] for name in patterns}
    head = {m: attention.pair_mean(per_pair[m]) for m in attention.REPEATED_SCORES if m in wanted}
    if "prefix_matching_sd" in wanted:
        head["prefix_matching_sd"] = attention.pair_sd(per_pair["prefix_matching"])
    return head, per_pair


def _z_scores(model, kept, rows, n, bos, wanted, per_pair) -> dict[str, torch.Tensor]:
    """LA, its correlation with prefix matching, and DLA from the kept ``hook_z`` slices."""
    z = stack_layers([kept[("z", layer)] for layer in range(model.cfg.n_layers)])  # [l,b,q,h,e]
    # a device map may place layers, unembedding, final norm apart: gathered where z[0] is
    W_O, W_U, rows = gathered([model.W_O, model.W_U, rows], z.device)
    head = {}
    if "logit_attribution" in wanted or "ps_la_correlation" in wanted:
        row_tokens = rows[:, int(bos) : int(bos) + n]
        target_index = (
            torch.arange(n, device=z.device) + 1
        ) % n  # y_q = x[q - n + 1] = s_{(i + 1) mod n}
        la = attribution.logit_attribution(z, W_O, W_U, row_tokens, target_index)
        if "logit_attribution" in wanted:
            head["logit_attribution"] = la.mean(dim=(1, 3))
        if "ps_la_correlation" in wanted:
            head["ps_la_correlation"] = attribution.pearson(per_pair["prefix_matching"], la)
    if "direct_logit_attribution" in wanted:
        centre, weight = _final_norm(model)
        weight = weight.to(z.device) if weight is not None else None
        targets = recall.induction_targets(rows, n, bos)
        dla = attribution.direct_logit_attribution(
            z, W_O, W_U, targets, kept["scale"].to(z.device), weight, centre
        )
        head["direct_logit_attribution"] = dla.mean(dim=(1, 3))
    return head


def _final_norm(model) -> tuple[bool, torch.Tensor | None]:
    """(centre?, weight) of the final norm, read from the architecture table above."""
    kind = getattr(model.cfg, "normalization_type", None)
    if kind not in NORM_CENTRES:
        raise IhprobeError(
            f"direct_logit_attribution needs a LayerNorm or RMSNorm final norm; this model has "
            f"{kind!r}. Leave direct_logit_attribution out of metrics."
        )
    weight = getattr(model.ln_final, "w", None)
    if weight is not None and weight.is_meta:  # an alias bound at boot to an offloaded stand-in
        weight = model.ln_final.weight  # the module's own, loaded under offload.readable
    return NORM_CENTRES[kind], weight
