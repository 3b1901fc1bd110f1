"""The metric table: what every metric of ihprobe scores, reads, and which way is better.

:data:`METRIC_TABLE` says, for every metric, what it scores (a head or the model), which input
family and hook sites it reads, which way is better, its chance level and its threshold. Every
consumer (``scan``, ``ablate``, ``emergence``, the figures) reads a metric's direction here.

>>> METRIC_TABLE["induction_loss"].direction, METRIC_TABLE["prefix_matching"].threshold
('lower', 0.3)
>>> [m for m in HEAD_METRICS if METRIC_TABLE[m].hooks == (PATTERN,)][:2]
['prefix_matching', 'prefix_matching_sd']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ihprobe.core.errors import IhprobeError

# hook sites a metric reads (keys of core.hooks.HOOK_POINTS; hook_name(site, layer) names them)
PATTERN, Z, SCALE = "pattern", "z", "scale"


def _uniform_attention(vocab: int, n: int) -> float:
    """Attention a key gets from a uniform causal head, averaged over second-half queries."""
    return sum(1 / (q + 1) for q in range(n, 2 * n)) / n


@dataclass(frozen=True)
class _SnippetChance:
    """``chance(vocab, n)`` of a snippet score (:func:`ihprobe.probes.attention.snippet_chance`),
    imported when first called: the table itself stays free of torch, so that ``ihprobe scan
    --help``, ``ihprobe metrics`` and the refusal of a bad metric name start fast."""

    score: str

    def __call__(self, vocab: int, n: int) -> float:
        from ihprobe.probes.attention import snippet_chance

        return snippet_chance(self.score)(vocab, n)


@dataclass(frozen=True)
class Metric:
    """One metric: what it scores, what it reads, which way is better, and its reference levels.

    ``chance`` maps ``(d_vocab, n)`` (``n``: the probe's half-length or snippet length) to the
    value a model with no induction would get; ``threshold`` is the level that counts as formed
    (emergence), ``min_rise`` the least rise that counts as a transition. ``relative`` is False
    for a metric whose clean value can be near zero or change sign: its changes are compared
    on the absolute scale only. ``by_default`` is False for a scan metric that ``scan``
    computes only when it is named (``fv``, computed by a layer above this one and registered
    in :mod:`ihprobe.probes.provided`).
    """

    name: str
    level: Literal["head", "model"]
    family: Literal["repeated", "snippets", "weights", "text", "tasks", "training"]
    hooks: tuple[str, ...]  # hook sites read (core.hooks.HOOK_POINTS keys)
    direction: Literal["higher", "lower"]
    chance: Callable[[int, int], float] | None = None
    threshold: float | None = None
    min_rise: float = 0.0
    relative: bool = True  # False: the clean value can be near 0 or flip sign; absolute only
    in_scan: bool = True
    by_default: bool = True  # False: scan computes it only when named (it costs more passes)
    in_ablate: bool = False

    @property
    def harm_sign(self) -> int:
        """+1 when a larger value is worse (losses, ranks), -1 when larger is better."""
        return 1 if self.direction == "lower" else -1


_LOGITS = ("unembed_in",)
_VS = {"chance": lambda v, n: 0.0, "relative": False}  # another loss minus backward_copy_loss
METRIC_TABLE: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "prefix_matching",
            "head",
            "repeated",
            (PATTERN,),
            "higher",
            _uniform_attention,
            threshold=0.3,
            min_rise=0.1,
        ),
        Metric("prefix_matching_sd", "head", "repeated", (PATTERN,), "higher"),
        Metric("previous_token", "head", "repeated", (PATTERN,), "higher", _uniform_attention),
        Metric("duplicate_token", "head", "repeated", (PATTERN,), "higher", _uniform_attention),
        Metric(
            "forward_induction_fixed",
            "head",
            "snippets",
            (PATTERN,),
            "higher",  # [B]'s
            _SnippetChance("forward_induction_fixed"),
            threshold=0.3,
            min_rise=0.1,
        ),
        Metric(
            "anti_induction",
            "head",
            "snippets",
            (PATTERN,),
            "higher",  # [B]'s, fixed |S|
            _SnippetChance("anti_induction"),
            threshold=0.3,
        ),
        Metric(
            "forward_induction_varied",
            "head",
            "snippets",
            (PATTERN,),
            "higher",  # |S| 10-30
            _SnippetChance("forward_induction_varied"),
            threshold=0.3,
            min_rise=0.1,
        ),
        Metric(
            "backward_duplicate",
            "head",
            "snippets",
            (PATTERN,),
            "higher",
            _SnippetChance("backward_duplicate"),
            threshold=0.3,
        ),
        Metric(
            "backward_previous_token",
            "head",
            "snippets",
            (PATTERN,),
            "higher",
            _SnippetChance("backward_previous_token"),
        ),
        Metric("copying", "head", "weights", (), "higher", lambda v, n: 0.0),
        Metric(
            "logit_attribution",
            "head",
            "repeated",
            (Z,),
            "higher",
            lambda v, n: 1 / n,
            min_rise=0.1,
        ),
        Metric("ps_la_correlation", "head", "repeated", (PATTERN, Z), "higher", lambda v, n: 0.0),
        # strongest K-composition (minus its random baseline) from a previous-token head
        Metric("k_composition", "head", "repeated", (PATTERN,), "higher", lambda v, n: 0.0),
        Metric("direct_logit_attribution", "head", "repeated", (Z, SCALE), "higher"),
        # Todd et al.'s average indirect effect: a rise in probability, 0 for a head whose
        # last-token output carries no task (docs/methods/fv.md, "Chance level")
        Metric(
            "fv",
            "head",
            "tasks",
            (Z,),
            "higher",
            lambda v, n: 0.0,
            relative=False,
            by_default=False,
        ),
        Metric(
            "ar_accuracy",
            "model",
            "repeated",
            _LOGITS,
            "higher",
            lambda v, n: 1 / v,
            min_rise=0.1,
            in_ablate=True,
        ),
        Metric(
            "ar_mean_rank",
            "model",
            "repeated",
            _LOGITS,
            "lower",
            lambda v, n: (v - 1) / 2,
            in_ablate=True,
        ),
        Metric(
            "induction_loss",
            "model",
            "repeated",
            _LOGITS,
            "lower",
            lambda v, n: math.log(v),
            in_ablate=True,
        ),
        Metric(
            "backward_copy_loss", "model", "snippets", _LOGITS, "lower", lambda v, n: math.log(v)
        ),
        Metric(
            "backward_copy_accuracy",
            "model",
            "snippets",
            _LOGITS,
            "higher",
            lambda v, n: 1 / v,
            threshold=0.5,
            min_rise=0.1,
        ),
        Metric("backward_copy_vs_first_half", "model", "snippets", _LOGITS, "higher", **_VS),
        Metric("backward_copy_vs_shuffled", "model", "snippets", _LOGITS, "higher", **_VS),
        # loss(late) - loss(early): more negative is better in-context learning
        Metric(
            "icl_score",
            "model",
            "text",
            _LOGITS,
            "lower",
            lambda v, n: 0.0,
            relative=False,
            in_ablate=True,
        ),
        Metric(
            "natural_loss",
            "model",
            "text",
            _LOGITS,
            "lower",
            lambda v, n: math.log(v),
            in_scan=False,
            in_ablate=True,
        ),
        Metric(
            "hits@1",
            "model",
            "tasks",
            _LOGITS,
            "higher",
            lambda v, n: 1 / v,
            in_scan=False,
            in_ablate=True,
        ),
        Metric(
            "hits@3",
            "model",
            "tasks",
            _LOGITS,
            "higher",
            lambda v, n: 3 / v,
            in_scan=False,
            in_ablate=True,
        ),
        Metric("loss", "model", "training", (), "lower", in_scan=False),  # the trainer's log
    )
}

HEAD_METRICS = tuple(m.name for m in METRIC_TABLE.values() if m.in_scan and m.level == "head")
SCAN_METRICS = tuple(m.name for m in METRIC_TABLE.values() if m.in_scan)
# what scan computes when no metric is named: every scan metric but the costly ones (fv)
DEFAULT_METRICS = tuple(m for m in SCAN_METRICS if METRIC_TABLE[m].by_default)
ABLATION_METRICS = tuple(m.name for m in METRIC_TABLE.values() if m.in_ablate)


def check_metrics(metrics: Sequence[str] | str | None) -> list[str]:
    """The requested scan metrics in canonical order; :data:`DEFAULT_METRICS` for None (every
    scan metric but ``fv``, which is computed only when named).

    >>> check_metrics("induction_loss, prefix_matching")
    ['prefix_matching', 'induction_loss']
    >>> "fv" in check_metrics(None), check_metrics(["fv"])
    (False, ['fv'])
    """
    if metrics is None:
        return list(DEFAULT_METRICS)
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if not isinstance(metrics, (list, tuple)) or not all(isinstance(m, str) for m in metrics):
        raise IhprobeError(
            f"metrics must be a metric name or a list of names (got {metrics!r:.60})."
        )
    unknown = [m for m in metrics if m not in SCAN_METRICS]
    if unknown or not metrics:
        raise IhprobeError(
            f"unknown metric {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"valid metrics are {', '.join(SCAN_METRICS)}."
        )
    return [m for m in SCAN_METRICS if m in metrics]
