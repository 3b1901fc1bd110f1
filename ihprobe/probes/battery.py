"""``scan``: every head score and model score of a model, one forward pass per input family.

Input families and what each gives (SPEC sections 1-3):

* repeated random tokens ``[s, s]`` -- one pass with hooks that keep, per layer, the attention
  at the (query, key) pairs of the pattern scores (``[batch, head, pair]``), ``hook_z`` at the
  ``n`` second-half queries, and ``ln_final.hook_scale`` there; only those queries are
  unembedded, and their logits give the recall scores. Nothing else of the pass is kept (no
  ``run_with_cache``).
* Bi-Induct snippets -- forward ``[S, SEP, S]`` and backward ``[S, SEP, reverse(S)]`` rows in
  one pass, attention pairs only.
* weights -- the OV copying score, no pass at all.
* natural text, when given -- one plain pass for the ICL score.

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

import torch
from jaxtyping import Int

from ihprobe import hooks, inputs
from ihprobe.errors import IhprobeError
from ihprobe.models import provenance
from ihprobe.probes import attention, attribution, copying, recall
from ihprobe.scores import HeadScores
from ihprobe.validation import check_scores, require_finite

log = logging.getLogger(__name__)

HEAD_METRICS = (
    "prefix_matching",
    "prefix_matching_sd",
    "previous_token",
    "duplicate_token",
    "forward_induction",
    "anti_induction",
    "copying",
    "logit_attribution",
    "ps_la_correlation",
    "direct_logit_attribution",
)
MODEL_METRICS = ("ar_accuracy", "ar_mean_rank", "induction_loss", "icl_score")
METRICS = HEAD_METRICS + MODEL_METRICS

# which attention pairs of the repeated-token pass each metric reads
REPEATED_PATTERNS = {
    "prefix_matching": "prefix_matching",
    "prefix_matching_sd": "prefix_matching",
    "ps_la_correlation": "prefix_matching",
    "previous_token": "previous_token",
    "duplicate_token": "duplicate_token",
}
Z_METRICS = ("logit_attribution", "ps_la_correlation", "direct_logit_attribution")
LOGIT_METRICS = ("ar_accuracy", "ar_mean_rank", "induction_loss")
REPEATED_METRICS = (*REPEATED_PATTERNS, *Z_METRICS, *LOGIT_METRICS)
UNEMBED_IN = "unembed.hook_in"
DEFAULT_CHUNK = 25  # rows per forward pass: bounds memory, leaves every score unchanged
NORM_CENTRES = {"LN": True, "LNPre": True, "RMS": False, "RMSPre": False}


def scan(
    model,
    metrics: Sequence[str] | None = None,
    *,
    n: int | None = None,
    batch: int = 100,
    seed: int = 0,
    bos: bool = False,
    tokens: Int[torch.Tensor, "batch pos"] | None = None,
    text: str | Sequence[str] | Int[torch.Tensor, "batch pos"] | None = None,
    snippet_length: int | None = None,
    chunk: int | None = DEFAULT_CHUNK,
) -> HeadScores:
    """Score every head and the model on the probes of SPEC sections 2-3.

    Args:
        model: a hooked model from :func:`ihprobe.load` (any TransformerLens model with the
            standard hook names and ``W_E, W_V, W_O, W_U``).
        metrics: names from :data:`METRICS`; None for all (``icl_score`` only with ``text``).
        n: half-length of the repeated random tokens; default ``min(50, n_ctx // 2)``.
        batch: rows of repeated tokens, and of each snippet direction.
        seed: seeds every random probe input.
        bos: prepend the tokenizer's BOS to the probe rows.
        tokens: your own repeated sequences ``[batch, 2n]`` (``[batch, 2n + 1]`` with ``bos``)
            instead of random ones; the second half must repeat the first.
        text: natural text for the ICL score -- a string, a list of documents, or token ids
            ``[rows, pos]``; cut into up to ``batch`` rows.
        snippet_length: ``|S|`` of the snippets; default 20, less when the context is short.
        chunk: rows per forward pass (default 25); None runs each input family's rows in one
            pass. Chunks bound memory (every score is a mean over rows, so the numbers do not
            change): 48x less peak memory than ``run_with_cache`` at batch 100, and, like one
            pass, within 1.3x of a bare forward on a CPU (``benchmarks/RESULTS_probes.md``);
            on an accelerator larger chunks or None can be a little faster.

    Returns:
        :class:`~ihprobe.scores.HeadScores` with provenance and settings.

    Raises:
        IhprobeError: an unknown metric (the message lists the valid ones), ``n`` too long for
            the context (it gives the largest that fits), a vocabulary smaller than ``n``,
            ``tokens`` whose halves differ, or text too short for the ICL positions.

    Example:
        >>> scores = scan(model, n=32, batch=50, seed=1)                   # doctest: +SKIP
        >>> scores.top_heads("prefix_matching", k=3)                       # doctest: +SKIP
    """
    requested = check_metrics(metrics)
    wanted = [m for m in requested if m != "icl_score" or text is not None]
    if chunk is not None and chunk < 1:
        raise IhprobeError(f"chunk must be a positive number of rows or None (got {chunk}).")
    settings: dict = {"metrics": wanted, "batch": batch, "seed": seed, "bos": bos, "notes": []}
    if "icl_score" in requested and text is None:
        note = "icl_score skipped: pass natural text (text=..., or --text FILE) to compute it"
        settings["notes"].append(note)
        log.info(note)
    head: dict[str, torch.Tensor] = {}
    model_scores: dict[str, float] = {}
    with torch.no_grad():
        if any(m in REPEATED_METRICS for m in wanted):
            probe, n = _repeated_probe(model, tokens, n=n, batch=batch, seed=seed, bos=bos)
            settings.update(n=n, tokens="given" if tokens is not None else "random")
            h, m = _repeated_pass(model, probe, n, bos, wanted, chunk)
            head.update(h)
            model_scores.update(m)
        if any(m in attention.SNIPPET_SCORES for m in wanted):
            length = snippet_length or min(
                inputs.SNIPPET_LENGTH, (model.cfg.n_ctx - 1 - int(bos)) // 2
            )
            settings["snippet_length"] = length
            head.update(_snippet_pass(model, wanted, length, batch, seed, bos, chunk))
        if "copying" in wanted:
            head["copying"] = copying.copying_scores(model)
        if "icl_score" in wanted:
            rows = text_rows(model, text, batch)
            early, late = recall.icl_positions(model.cfg.n_ctx)
            settings.update(icl_positions=[early, late], icl_rows=len(rows))
            model_scores["icl_score"] = _icl_pass(model, rows, early, late, chunk)
    ordered_head = {k: head[k].float().cpu() for k in METRICS if k in head}
    ordered_model = {k: model_scores[k] for k in METRICS if k in model_scores}
    check_scores(ordered_head, ordered_model)  # a NaN/inf score is an error naming the metric
    return HeadScores(ordered_head, ordered_model, provenance(model), settings)


def check_metrics(metrics: Sequence[str] | str | None) -> list[str]:
    """The requested metrics in canonical order; all of them for None."""
    if metrics is None:
        return list(METRICS)
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise IhprobeError(
            f"unknown metric {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"valid metrics are {', '.join(METRICS)}."
        )
    return [m for m in METRICS if m in metrics]


def _repeated_probe(model, tokens, *, n, batch, seed, bos) -> tuple[torch.Tensor, int]:
    """The repeated-token rows: the caller's (validated) or random ones; and their ``n``."""
    if tokens is None:
        probe = inputs.repeated_tokens(model, n=n, batch=batch, seed=seed, bos=bos)
        return probe, (probe.shape[1] - int(bos)) // 2
    return check_repeated(model, tokens, n=n, bos=bos), (tokens.shape[1] - int(bos)) // 2


def check_repeated(
    model, tokens: Int[torch.Tensor, "batch pos"], *, n: int | None = None, bos: bool = False
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
    if tokens.min() < 0 or tokens.max() >= model.cfg.d_vocab:
        raise IhprobeError(f"tokens must be ids in [0, {model.cfg.d_vocab}) for this model.")
    first, second = tokens[:, int(bos) : int(bos) + half], tokens[:, int(bos) + half :]
    bad = (first != second).any(1).nonzero().flatten()
    if len(bad):
        raise IhprobeError(
            f"tokens must repeat: the second half of row {int(bad[0])} differs from the first "
            f"({len(bad)} rows differ). Pass rows [s_1..s_n, s_1..s_n]"
            f"{', after one BOS' * bos}, or tokens=None for random ones."
        )
    return tokens.to(model.cfg.device)


def _run_kept(model, rows, make_hooks, chunk: int | None, reduce_logits=None) -> dict:
    """Run ``rows`` through the model ``chunk`` rows at a time (all at once for None).

    ``make_hooks(store)`` gives the hooks of one pass, which fill ``store``; the slices they
    keep, and ``reduce_logits(logits, rows)`` per row when given, are concatenated over the
    chunks along the batch dimension. Chunking bounds the memory of the pass; every score is a
    mean over rows, so it does not change the numbers.
    """
    kept: dict = {}
    for part in rows.split(chunk or len(rows)):
        store: dict = {}
        logits = model.run_with_hooks(part, fwd_hooks=make_hooks(store))
        if reduce_logits is not None:
            store["logits"] = reduce_logits(logits, part)
        for key, value in store.items():
            kept.setdefault(key, []).append(value)
        del logits
    return {key: torch.cat(values, dim=0) for key, values in kept.items()}


def _repeated_pass(model, probe, n: int, bos: bool, wanted: list[str], chunk: int | None):
    """One forward pass on repeated tokens; every score of that family from small slices."""
    n_layers = model.cfg.n_layers
    named = attention.repeated_pairs(n, bos)
    patterns = {
        name: named[name]
        for name in dict.fromkeys(REPEATED_PATTERNS[m] for m in wanted if m in REPEATED_PATTERNS)
    }
    queries = recall.query_positions(n, bos)
    need_z = any(m in Z_METRICS for m in wanted)
    need_scale = "direct_logit_attribution" in wanted
    need_logits = any(m in LOGIT_METRICS for m in wanted)
    if patterns:
        pairs, where = attention.concat_pairs(patterns)
        select_pairs = hooks.pattern_pairs(*pairs)
    at_queries = hooks.positions(queries)
    # unembed only the query positions (none when no logit metric is wanted)
    unembedded = queries if need_logits else queries[:0]

    def make_hooks(store: dict) -> list:
        found = _unembed_only(model, hooks.positions(unembedded))
        for layer in range(n_layers):
            if patterns:
                name = f"blocks.{layer}.attn.hook_pattern"
                found.append((name, hooks.keep(store, ("pattern", layer), select_pairs)))
            if need_z:
                name = f"blocks.{layer}.attn.hook_z"
                found.append((name, hooks.keep(store, ("z", layer), at_queries)))
        if need_scale:
            found.append(("ln_final.hook_scale", hooks.keep(store, "scale", at_queries)))
        return found

    def recall_rows(logits, rows):  # [rows, 3]: AR accuracy, AR mean rank, induction loss
        if logits.shape[1] != len(unembedded):  # a model whose unembedding ignored the slice
            logits = logits[:, unembedded.to(logits.device)]
        require_finite(", ".join(m for m in wanted if m in LOGIT_METRICS), logits=logits)
        targets = recall.induction_targets(rows, n, bos)
        accuracy, mean_rank = recall.query_recall(logits, targets)
        return torch.stack([accuracy, mean_rank, recall.query_loss(logits, targets)], dim=1)

    kept = _run_kept(model, probe, make_hooks, chunk, recall_rows if need_logits else None)

    head: dict[str, torch.Tensor] = {}
    per_pair = {}
    if patterns:
        stacked = torch.stack([kept[("pattern", layer)] for layer in range(n_layers)])
        per_pair = {name: stacked[..., where[name]] for name in patterns}  # [l, b, h, pair]
        for metric in ("prefix_matching", "previous_token", "duplicate_token"):
            if metric in wanted:
                head[metric] = attention.pair_mean(per_pair[metric])
        if "prefix_matching_sd" in wanted:
            head["prefix_matching_sd"] = attention.pair_sd(per_pair["prefix_matching"])
    if need_z:
        z = torch.stack([kept[("z", layer)] for layer in range(n_layers)])  # [l, b, q, h, e]
        if "logit_attribution" in wanted or "ps_la_correlation" in wanted:
            row_tokens = probe[:, int(bos) : int(bos) + n]
            target_index = (torch.arange(n) + 1) % n  # y_q = x[q - n + 1] = s_{(i + 1) mod n}
            la = attribution.logit_attribution(z, model.W_O, model.W_U, row_tokens, target_index)
            if "logit_attribution" in wanted:
                head["logit_attribution"] = la.mean(dim=(1, 3))
            if "ps_la_correlation" in wanted:
                head["ps_la_correlation"] = attribution.pearson(per_pair["prefix_matching"], la)
        if need_scale:
            centre, weight = _final_norm(model)
            head["direct_logit_attribution"] = attribution.direct_logit_attribution(
                z,
                model.W_O,
                model.W_U,
                recall.induction_targets(probe, n, bos),
                kept["scale"],
                weight,
                centre,
            ).mean(dim=(1, 3))

    model_scores = {}
    if need_logits:
        per_row = kept["logits"].mean(0)
        for i, metric in enumerate(LOGIT_METRICS):
            if metric in wanted:
                model_scores[metric] = float(per_row[i])
    return head, model_scores


def _unembed_only(model, select) -> list:
    """The hook that unembeds only ``select``-ed positions, where the model has that hook
    point (TransformerBridge); other models unembed everything and the caller slices."""
    if UNEMBED_IN not in getattr(model, "hook_dict", {}):
        return []
    return [(UNEMBED_IN, hooks.replace_with(select))]


def _final_norm(model) -> tuple[bool, torch.Tensor | None]:
    """(centre?, weight) of the final norm, read from the architecture table above."""
    kind = getattr(model.cfg, "normalization_type", None)
    if kind not in NORM_CENTRES:
        raise IhprobeError(
            f"direct_logit_attribution needs a LayerNorm or RMSNorm final norm; this model has "
            f"{kind!r}. Leave direct_logit_attribution out of metrics."
        )
    weight = getattr(model.ln_final, "w", None)
    return NORM_CENTRES[kind], weight


def _snippet_pass(model, wanted, length: int, batch: int, seed: int, bos: bool, chunk):
    """Forward and backward snippets stacked into one pass; attention pairs only."""
    families = {
        "forward_induction": (False, attention.forward_pairs(length, bos)),
        "anti_induction": (True, attention.backward_pairs(length, bos)),
    }
    families = {name: f for name, f in families.items() if name in wanted}
    rows = torch.cat(
        [
            inputs.snippets(
                model, backward=backward, length=length, batch=batch, seed=seed, bos=bos
            )
            for backward, _ in families.values()
        ]
    )
    pairs, where = attention.concat_pairs({name: p for name, (_, p) in families.items()})
    select = hooks.pattern_pairs(*pairs)
    n_layers = model.cfg.n_layers

    def make_hooks(store: dict) -> list:
        return _unembed_only(model, lambda x: x[:, :0]) + [
            (f"blocks.{layer}.attn.hook_pattern", hooks.keep(store, layer, select))
            for layer in range(n_layers)
        ]

    kept = _run_kept(model, rows, make_hooks, chunk)
    stacked = torch.stack([kept[layer] for layer in range(n_layers)])
    return {
        name: attention.pair_mean(stacked[:, i * batch : (i + 1) * batch, :, where[name]])
        for i, name in enumerate(families)
    }


def _icl_pass(model, rows, early: int, late: int, chunk: int | None) -> float:
    """The ICL score over ``rows``, unembedding only the two positions that predict tokens
    ``early`` and ``late`` (a 2048-token context would otherwise hold [rows, 2048, vocab])."""
    predicting = torch.tensor([early - 1, late - 1])

    def icl_rows(logits, part):
        if logits.shape[1] != len(predicting):
            logits = logits[:, predicting.to(logits.device)]
        losses = [
            recall.query_loss(logits[:, i : i + 1], part[:, [t]])
            for i, t in enumerate((early, late))
        ]
        return losses[1] - losses[0]

    kept = _run_kept(
        model,
        rows[:, : late + 1],
        lambda store: _unembed_only(model, hooks.positions(predicting)),
        chunk,
        icl_rows,
    )
    return float(kept["logits"].mean())


def text_rows(
    model, text: str | Sequence[str] | torch.Tensor, batch: int
) -> Int[torch.Tensor, "rows pos"]:
    """Natural text cut into up to ``batch`` rows of ``late + 1`` tokens for the ICL score.

    Documents are tokenized with the model's tokenizer and joined with its EOS token (when it
    has one) into one stream; token-id tensors ``[rows, pos]`` are used as given.

    Example:
        >>> text_rows(model, open("book.txt").read(), batch=16).shape       # doctest: +SKIP
        torch.Size([16, 501])
    """
    early, late = recall.icl_positions(model.cfg.n_ctx)
    need = late + 1
    if isinstance(text, torch.Tensor):
        rows = text if text.ndim == 2 else text.view(1, -1)
        if rows.shape[1] < need:
            raise IhprobeError(
                f"text rows hold {rows.shape[1]} tokens; the ICL score compares tokens {early} "
                f"and {late}, so rows need at least {need}."
            )
        return rows[:batch, :need].to(model.cfg.device)
    documents = [text] if isinstance(text, str) else list(text)
    tok = model.tokenizer
    stream: list[int] = []
    for doc in documents:
        stream += tok(doc, add_special_tokens=False).input_ids
        if tok.eos_token_id is not None:
            stream.append(tok.eos_token_id)
    count = min(batch, len(stream) // need)
    if count == 0:
        raise IhprobeError(
            f"the text holds {len(stream)} tokens; the ICL score compares tokens {early} and "
            f"{late}, so it needs at least {need}. Pass more text."
        )
    rows = torch.tensor(stream[: count * need]).view(count, need)
    return rows.to(model.cfg.device)
