"""What every metric means: the glossary ``ihprobe metrics`` prints and ``docs/methods/metrics.md``
renders, one table for both.

Each row joins :data:`~ihprobe.probes.metrics.METRIC_TABLE` (level, direction, chance level)
with what the metric measures and the paper it comes from (:data:`MEANING`). The chance level is
computed from the metric table at the default probe (:data:`DEFAULT_PROBE`: repeated halves of
``n = 50`` tokens, snippets of ``|S| = 20``, varied snippets of 10 to 30): a number where it
depends only on the probe, the formula in the vocabulary size ``V`` where it depends on ``V``
(or its value, given ``vocab``). [A] is Aoyama et al. 2025, [B] Sabry & Belz 2025.

>>> rows = glossary_rows()
>>> row = next(r for r in rows if r.name == "prefix_matching")
>>> row.direction, row.chance
('higher', '0.01376')
>>> next(r.chance for r in glossary_rows(vocab=512) if r.name == "induction_loss")
'6.238'
"""

from __future__ import annotations

from dataclasses import dataclass

from ihprobe.probes.metrics import METRIC_TABLE

# the probe scan runs by default on a model with room for it (probes/inputs: min(50, n_ctx // 2),
# SNIPPET_LENGTH, VARIED_LENGTHS); the snippet scores of the table take |S| for n
DEFAULT_PROBE = {"repeated": 50, "snippets": 20}
SOURCES = {
    "[A]": "Aoyama et al. 2025, Predicting the Emergence of Induction Heads in Language Model "
    "Pretraining",
    "[B]": "Sabry & Belz 2025, Induction Signatures Are Not Enough",
    "Olsson 2022": "Olsson et al. 2022, In-context Learning and Induction Heads",
    "Elhage 2021": "Elhage et al. 2021, A Mathematical Framework for Transformer Circuits",
    "Wang 2022": "Wang et al. 2022, Interpretability in the Wild (IOI)",
    "Todd 2024": "Todd et al. 2024, Function Vectors in Large Language Models",
}


@dataclass(frozen=True)
class Meaning:
    """What a metric measures, the papers it comes from, and its chance formula in ``V`` (for
    a chance level that depends on the vocabulary size)."""

    measures: str
    source: str
    formula: str | None = None


_UNIFORM = "uniform attention over the earlier tokens"
MEANING: dict[str, Meaning] = {
    "prefix_matching": Meaning(
        "attention from each repeated token to the token after its earlier occurrence, on "
        "random tokens repeated once (the induction pattern)",
        "[A]; Olsson 2022",
    ),
    "prefix_matching_sd": Meaning(
        "standard deviation over rows and queries of the attention behind prefix_matching: "
        "how evenly the head does it",
        "[A]'s code",
    ),
    "previous_token": Meaning(
        "attention from each repeated token to the token just before it", "Elhage 2021"
    ),
    "duplicate_token": Meaning(
        "attention from each repeated token to its own earlier occurrence", "Wang 2022"
    ),
    "forward_induction_fixed": Meaning(
        "forward induction attention on [S, SEP, S] snippets of one length; a head looking a "
        "fixed |S| back also passes it",
        "[B]",
    ),
    "anti_induction": Meaning(
        "attention from the reversed copy's s_k to position k - 1 on [S, SEP, reverse(S)]; no "
        "content match raises it in a causal model",
        "[B]",
    ),
    "forward_induction_varied": Meaning(
        "forward induction attention on snippets whose |S| varies by row (10 to 30): only a "
        "content match scores high",
        "ihprobe, after [B]",
    ),
    "backward_duplicate": Meaning(
        "attention from the reversed copy's s_k to the earlier s_k: the second step of backward "
        "copying",
        "ihprobe, after [B]",
    ),
    "backward_previous_token": Meaning(
        "previous-token attention inside S of a backward snippet: the first step of backward "
        "copying",
        "ihprobe, after [B]",
    ),
    "copying": Meaning(
        "sum of the OV circuit's eigenvalues over the sum of their magnitudes, from weights: +1 "
        "raises the attended token's logit, -1 suppresses it",
        "Elhage 2021; Olsson 2022",
    ),
    "logit_attribution": Meaning(
        "share of the head's direct output that favours the correct next token among the row's "
        "n tokens (LA)",
        "[A]",
    ),
    "ps_la_correlation": Meaning(
        "Pearson correlation of prefix-matching attention and LA over rows and queries", "[A]"
    ),
    "k_composition": Meaning(
        "strongest K-composition from an earlier previous-token head, minus its random baseline",
        "Elhage 2021",
    ),
    "direct_logit_attribution": Meaning(
        "the head's output through the final norm, on the correct token's unembedding (DLA)",
        "Elhage 2021; TransformerLens's logit_attrs",
    ),
    "fv": Meaning(
        "function-vector score (average indirect effect): the rise in the answer's probability "
        "when the head's mean output over few-shot prompts is patched into label-shuffled ones, "
        "over the tasks done above chance (scan computes it only when named; needs a text "
        "tokenizer)",
        "Todd 2024",
    ),
    "ar_accuracy": Meaning(
        "share of repeated positions whose top prediction is the token that repeats "
        "(associative recall)",
        "[A]",
        "1/V",
    ),
    "ar_mean_rank": Meaning(
        "mean rank of the token that repeats among the model's predictions", "[A]", "(V - 1)/2"
    ),
    "induction_loss": Meaning(
        "cross-entropy (nats) of the token that repeats, over the repeated half",
        "Olsson 2022",
        "ln V",
    ),
    "backward_copy_loss": Meaning(
        "cross-entropy (nats) of the next token of a reversed copy [S, SEP, reverse(S)]",
        "ihprobe, after [B]",
        "ln V",
    ),
    "backward_copy_accuracy": Meaning(
        "share of a reversed copy's positions whose top prediction is its next token",
        "ihprobe, after [B]",
        "1/V",
    ),
    "backward_copy_vs_first_half": Meaning(
        "loss on S's own fresh tokens minus backward_copy_loss (nats): how much easier the copy is",
        "ihprobe, after [B]",
    ),
    "backward_copy_vs_shuffled": Meaning(
        "loss on a shuffled copy minus backward_copy_loss (nats): what the reverse order adds",
        "ihprobe, after [B]",
    ),
    "icl_score": Meaning(
        "loss at a late token minus loss at an early one on natural text (nats; needs --text)",
        "Olsson 2022",
    ),
    "natural_loss": Meaning(
        "cross-entropy (nats) on natural text (ablate only)", "ihprobe", "ln V"
    ),
    "hits@1": Meaning(
        "share of task prompts whose answer is the top prediction (ablate only)",
        "Todd 2024; [B]",
        "1/V",
    ),
    "hits@3": Meaning(
        "share of task prompts whose answer is among the top 3 predictions (ablate only)",
        "Todd 2024; [B]",
        "3/V",
    ),
    "loss": Meaning("the trainer's training loss (train's log only)", "ihprobe"),
}


@dataclass(frozen=True)
class GlossaryRow:
    """One metric as the glossary shows it."""

    name: str
    level: str
    measures: str
    chance: str
    direction: str
    source: str


def chance_level(name: str, vocab: int | None = None) -> float | None:
    """The metric table's chance level of ``name`` at the default probe, at vocabulary ``vocab``
    (None where it depends on ``V`` and no ``vocab`` is given, or the metric has none).

    >>> round(chance_level("prefix_matching"), 4), chance_level("ar_accuracy")
    (0.0138, None)
    """
    metric = METRIC_TABLE[name]
    if metric.chance is None or (vocab is None and MEANING[name].formula is not None):
        return None
    return metric.chance(vocab or 0, DEFAULT_PROBE.get(metric.family, DEFAULT_PROBE["repeated"]))


def glossary_rows(vocab: int | None = None) -> list[GlossaryRow]:
    """Every metric of the metric table, in its order, with its chance level as text: computed
    at the default probe, the formula in ``V`` without ``vocab``, ``none`` without one."""
    rows = []
    for name, metric in METRIC_TABLE.items():
        meaning, value = MEANING[name], chance_level(name, vocab)
        if value is not None:
            chance = f"{value:.4g}"
        else:
            chance = meaning.formula if metric.chance is not None and meaning.formula else "none"
        rows.append(
            GlossaryRow(
                name, metric.level, meaning.measures, chance, metric.direction, meaning.source
            )
        )
    return rows


def markdown(vocab: int | None = None) -> str:
    """The glossary as the markdown page ``docs/methods/metrics.md`` (``ihprobe metrics
    --markdown`` prints it; a test holds the page to it)."""
    lines = [
        "# Metrics",
        "",
        "Every metric ihprobe computes: what it measures, its chance level (what a model without "
        "induction scores) at the default probe, which way is better, and where it comes from. "
        "Generated by `ihprobe metrics --markdown` from `ihprobe/probes/glossary.py` and the "
        "metric table (`ihprobe/probes/metrics.py`); do not edit by hand.",
        "",
        "The default probe: repeated halves of n = 50 random tokens, snippets of |S| = 20, varied "
        "snippets of |S| 10 to 30. Attention chance levels are those of " + _UNIFORM + "; V is "
        "the vocabulary size. Head metrics score each head, model metrics the whole model; "
        "`scan` computes all but the ones marked ablate or train only, and `fv` only when "
        "named.",
        "",
        "| metric | level | measures | chance | better | source |",
        "|---|---|---|---|---|---|",
    ]
    for row in glossary_rows(vocab):
        lines.append(
            f"| `{row.name}` | {row.level} | {row.measures.replace('|', chr(92) + '|')} | "
            f"{row.chance} | {row.direction} | "
            f"{row.source} |"
        )
    lines += ["", "Sources:", ""] + [f"- {key}: {title}" for key, title in SOURCES.items()]
    return "\n".join(lines) + "\n"
