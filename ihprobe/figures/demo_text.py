"""The sentences of the demo report and summary, each chosen from the numbers it states, so
that none can contradict the data.

>>> loss_text(0.18, 4.16)[:40]
'The final induction loss, 0.18 nats, is '
"""

from __future__ import annotations

import html
import math

import pandas as pd
import torch

from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.figures.report import Markup
from ihprobe.probes.metrics import METRIC_TABLE

THRESHOLD = METRIC_TABLE["prefix_matching"].threshold  # max PS that counts as formed

LAW_CONTEXT = (
    "The law was fitted to 2-layer GPT-2 models (d 768) trained with AdamW at lr 2.5e-4 on "
    "natural and synthetic corpora; <code>ihprobe fit-law</code> refits its constant and "
    "exponents from your own runs."
)


def emergence_text(point: EmergencePoint) -> Markup:
    """When max PS rose, or why no transition was found."""
    if not point.transition:
        reason = html.escape(str(point.reason))
        return Markup(f"No induction-head transition was detected: {reason}.")
    crossed = (
        f"; max PS first crosses {point.threshold} at step {point.threshold_step}"
        if point.threshold_step is not None
        else f"; max PS never crosses {point.threshold}"
    )
    return Markup(
        f"Prefix matching rose from chance: the steep segment of a 3-piece fit against "
        f"log(tokens) starts at about <b>{point.updates:,.0f} updates</b> (between checkpoints "
        f"at updates {point.updates_low:,.0f} and {point.updates_high:,.0f}){crossed}."
    )


def law_text(point: EmergencePoint, law_updates: float) -> Markup:
    """The measured emergence against the law's prediction, in words the numbers support."""
    if not point.transition:
        return Markup(
            f"The law predicts {law_updates:,.0f} updates; with no transition detected there is "
            f"nothing to compare it with. {LAW_CONTEXT}"
        )
    ratio = law_updates / point.updates
    if ratio >= 2:
        found = f"about {ratio:,.0f}x earlier than the law's {law_updates:,.0f} updates"
    elif ratio <= 0.5:
        found = f"about {1 / ratio:,.0f}x later than the law's {law_updates:,.0f} updates"
    else:
        found = f"within a factor of 2 of the {law_updates:,.0f} updates the law predicts"
    return Markup(f"The heads formed {found}. {LAW_CONTEXT}")


def top_head_text(layer: int, head: int, value: float, chance: float, n: int) -> str:
    """What the attention plot of the highest-PS head shows, chosen by its score."""
    name = f"L{layer}H{head}"
    if value >= THRESHOLD:
        return (
            f"Head {name} has the highest prefix-matching score ({value:.2f}; chance "
            f"{chance:.3f}). On a repeated random sequence of {n} tokens it attends like an "
            f"induction head, along the off-diagonal key = query - {n - 1}: from each token of "
            "the second copy to the token after its first occurrence."
        )
    return (
        f"The highest prefix-matching score is {name}'s {value:.2f}, below the {THRESHOLD} that "
        f"counts as an induction head (chance {chance:.3f}): no head attends like one. The plot "
        "shows this best candidate; an induction head would light up the off-diagonal "
        f"key = query - {n - 1}."
    )


def loss_text(final: float, uniform: float) -> Markup:
    """The induction loss against the uniform-guess loss ln V."""
    if final > uniform:
        return Markup(
            f"The final induction loss, {final:.2f} nats, sits <b>above</b> the uniform-guess loss "
            f"{uniform:.2f} (ln V): on the second copy the model does worse than guessing every "
            "token equally, confidently predicting tokens the first copy does not support."
        )
    return Markup(
        f"The final induction loss, {final:.2f} nats, is below the uniform-guess loss "
        f"{uniform:.2f} (ln V): the model uses the first copy to predict the second."
    )


def effects_text(effects, scores, metric: str = "ar_accuracy") -> str:
    """Which single head hurts ``metric`` most when ablated alone, and whether it is one of the
    heads with the induction signature (max PS above the formed threshold)."""
    layer, head, harm = effects.ranking(metric)[0]
    ps = scores.head_metric("prefix_matching")
    change = float(effects.change(metric)[layer, head])
    signature = [f"L{a}H{b}" for a, b in torch.nonzero(ps >= THRESHOLD).tolist()]
    named = ", ".join(signature) if signature else "none"
    found = f"L{layer}H{head} (PS {float(ps[layer, head]):.2f})"
    if harm <= 0:
        return (
            f"No single head's ablation makes {metric} worse (heads with the signature: {named})."
        )
    role = "one of" if f"L{layer}H{head}" in signature else "not one of"
    return (
        f"Ablated alone, {found} hurts {metric} most (change {change:+.3g}); it is {role} the "
        f"heads with the induction signature (PS >= {THRESHOLD}: {named}). Heads that each cost "
        "little alone but share a signature can still be needed together (redundancy)."
    )


# what the project's seeded runs measured on natural text
# (lab/studies/contrast/RESULTS_papers_contrast.md, lab/studies/natural_law/RESULTS_size.md)
NATURAL_MEASURED = (
    "the project's seeded runs on the embedded corpus formed none even in 8,000 updates of B=8, "
    "C=128 (8.2M tokens, d_model 64, 5 seeds per arm); on the larger documentation corpus "
    "(make corpus) a d_model 128 model at B=4, C=256 formed one in 4 of 5 seeds within 30M tokens"
)


def compare_note(summary: pd.DataFrame, default_steps: int | None = None) -> str | None:
    """What the runs without a formed head (final max PS below the threshold) would need, or
    ``None`` when every run formed one. A run on the demo's own data (``repeats``) is pointed to
    the demo's ``default_steps``, where its heads form, not to the law's count: the law was
    fitted to far larger models on natural text and predicts ~40x later on these data.

    Example:
        >>> row = {"run": "natural", "producer": "natural", "ps_final": 0.02, "steps": 500,
        ...        "law_updates": 15768.0}
        >>> compare_note(pd.DataFrame([row]))[:60]
        'natural formed no induction head at this budget (max PS 0.02'
    """
    short = summary[summary.ps_final < THRESHOLD]
    if short.empty:
        return None
    if default_steps is not None and short.producer.eq("repeats").all():
        return (
            f"{_names(list(short.run))} formed no induction head at this budget (max PS "
            f"{', '.join(f'{v:.3f}' for v in short.ps_final)}, below {THRESHOLD}) in "
            f"{int(short.steps.max()):,} updates; on these data the demo's default "
            f"--steps {default_steps} forms them (the law's {float(short.law_updates.max()):,.0f} "
            "updates is for larger models on natural text)."
        )
    law = float(short.law_updates.max())
    natural = short.producer.isin(["natural", "bi-induct"]).any()
    return (
        f"{_names(list(short.run))} formed no induction head at this budget (max PS "
        f"{', '.join(f'{v:.3f}' for v in short.ps_final)}, below {THRESHOLD}), so there is "
        f"nothing to compare: {int(short.steps.max()):,} updates, where the law predicts "
        f"{law:,.0f} at this B and C (--steps {math.ceil(law / 100) * 100})"
        + (f"; and {NATURAL_MEASURED}." if natural else ".")
    )


def _names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
