"""The repeated-token pass of :func:`~ihprobe.probes.battery.scan`: one forward pass over
``[s, s]`` rows with hooks that keep, per layer, the attention at the (query, key) pairs of the
pattern scores, ``hook_z`` at the ``n`` second-half queries and ``ln_final.hook_scale`` there;
every score of that family (pattern scores, logit and direct logit attribution, the recall
scores from the unembedded queries) comes from small slices of it.

>>> sorted(REPEATED_PATTERNS.values())[:2]
['duplicate_token', 'prefix_matching']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from jaxtyping import Int

from ihprobe.core import checks, hooks
from ihprobe.core.devices import gathered, stack_layers
from ihprobe.core.errors import IhprobeError
from ihprobe.io.offload import readable
from ihprobe.probes import attention, attribution, inputs, recall
from ihprobe.probes.engine import NOTHING, Probe, recall_probe, run_probe
from ihprobe.probes.metrics import HEAD_METRICS, METRIC_TABLE, PATTERN, SCALE, SCAN_METRICS, Z

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

MODEL_METRICS = tuple(m for m in SCAN_METRICS if METRIC_TABLE[m].level == "model")
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
LOGIT_METRICS = tuple(m for m in MODEL_METRICS if METRIC_TABLE[m].family == "repeated")
NORM_CENTRES = {"LN": True, "LNPre": True, "RMS": False, "RMSPre": False}


def repeated_rows(model, tokens, *, n, batch, seed, bos) -> tuple[torch.Tensor, int]:
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


def repeated_pass(model, rows, n: int, bos: bool, wanted: list[str], chunk, mode: str):
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
    """(centre?, weight) of the final norm, read from :data:`NORM_CENTRES`."""
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
