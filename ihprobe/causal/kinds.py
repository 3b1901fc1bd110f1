"""[B]'s question asked of both kinds of head (Yin & Steinhardt 2025): the 2 x 2 table.

Rows: the kind of head ablated, the top set by FV score (:func:`ihprobe.fv_scores`) or by prefix
matching; with ``exclusion=True`` each top set is chosen after the other kind's top set is
dropped from the candidates. Columns: few-shot ICL accuracy (``hits@1``) on held-out tasks and
the ICL score (loss at late minus early tokens). Every cell is one mean ablation against the
same random baselines, with the load-bearing index's 95% interval and a verdict line chosen by
:data:`ihprobe.causal.results.VERDICT_RULE`.

>>> table = ihprobe.kind_table(model, tasks=rank_on, held_out=judge_on)   # doctest: +SKIP
>>> print(table)                                                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

from ihprobe.causal.ablation import _scores, ablate
from ihprobe.causal.evaluation import natural_probe
from ihprobe.causal.fv import fv_ranking
from ihprobe.causal.head_sets import excluding
from ihprobe.causal.results import AblationResult
from ihprobe.core.errors import IhprobeError
from ihprobe.io.any_model import as_model

KINDS = ("fv", "prefix_matching")  # the ablated kinds, the table's rows
MEASURES = ("hits@1", "icl_score")  # few-shot accuracy on held-out tasks, the ICL score
COLUMNS = (
    "ablated",
    "measure",
    "method",
    "change",
    "random_change_mean",
    "p_value",
    "load_bearing_index",
    "load_bearing_lo",
    "load_bearing_hi",
    "answer",
    "verdict",
)


@dataclass(frozen=True)
class KindTable:
    """The 2 x 2 table (``frame``: one row per ablated kind x measure, :data:`COLUMNS`) and the
    two ablations behind it (``results[kind]``); ``str()`` is one verdict line per cell.

    Example:
        >>> table.cell("fv", "hits@1").answer                             # doctest: +SKIP
    """

    frame: pd.DataFrame
    results: dict[str, AblationResult] = field(repr=False)

    def cell(self, kind: str, measure: str) -> pd.Series:
        """The row of ``frame`` for ablating ``kind``, judged by ``measure``."""
        rows = self.frame[(self.frame.ablated == kind) & (self.frame.measure == measure)]
        if rows.empty:
            raise IhprobeError(f"no cell ({kind}, {measure}); kinds {KINDS}, measures {MEASURES}.")
        return rows.iloc[0]

    def __str__(self) -> str:
        return "\n".join(
            f"[{r.ablated} x {r.measure}] {r.verdict}" for r in self.frame.itertuples()
        )


def kind_table(
    model,
    *,
    tasks: Sequence | None = None,
    held_out: Sequence | None = None,
    exclusion: bool = False,
    top: float | int = 0.02,
    scope: str = "layer",
    draws: int = 20,
    seed: int = 0,
    text: str | Sequence[str] | None = None,
    text_rows: int = 32,
    fv: torch.Tensor | None = None,
    prefix: torch.Tensor | None = None,
    reference: torch.Tensor | None = None,
) -> KindTable:
    """Ablate the top FV heads and the top induction heads (mean ablation, random baselines) and
    judge each by few-shot accuracy on held-out tasks and by the ICL score.

    Args:
        model: a model ``ihprobe.load`` takes, with a tokenizer that reads text.
        tasks: the tasks FV scores rank heads on (``fv_scores``' default: the built-ins).
        held_out: the tasks accuracy is judged on (default: ``tasks``; pass others, as Yin &
            Steinhardt do, so that the FV top set is not judged on its own ranking tasks).
        exclusion: drop the other kind's top set from each kind's candidates first.
        top, scope, draws, seed, text, text_rows: as in :func:`ihprobe.ablate`.
        fv, prefix: ``[layer, head]`` scores to rank by instead of computing them.
        reference: tokens whose per-head mean z replaces an ablated head; default the natural
            text rows. (A head's mean over the task prompts themselves would still carry an FV
            head's task vector, so ablating it there would remove nothing.)

    Returns:
        A :class:`KindTable`.

    Example:
        >>> table = kind_table(model, held_out=["antonyms.tsv"], exclusion=True) # doctest: +SKIP
        >>> print(table.cell("prefix_matching", "icl_score").verdict)           # doctest: +SKIP
    """
    model = as_model(model)
    scores = {
        "fv": fv if fv is not None else fv_ranking(model, tasks, seed=seed),
        "prefix_matching": _scores(model, "prefix_matching", prefix, seed=seed),
    }
    judged = held_out if held_out is not None else tasks
    if reference is None:
        reference = natural_probe(model, text, rows=text_rows, natural_loss=False).tokens
    common = {"top": top, "scope": scope, "draws": draws, "seed": seed, "text": text}
    common |= {"text_rows": text_rows, "reference": reference, "mode": "mean"}
    common["metrics"] = list(MEASURES)
    rows, results = [], {}
    for kind in KINDS:
        (other,) = (k for k in KINDS if k != kind)
        ranking = scores[kind]
        if exclusion:
            ranking = excluding(scores[kind], scores[other], top=top, scope=scope)
        result = ablate(model, by=kind, scores=ranking, tasks=judged, **common)
        result.settings["exclude"] = other if exclusion else None
        results[kind] = result
        rows += _cells(result, kind, other if exclusion else None)
    return KindTable(pd.DataFrame(rows, columns=list(COLUMNS)), results)


def _cells(result: AblationResult, kind: str, excluded: str | None) -> list[tuple]:
    """The table's rows (:data:`COLUMNS`) of one ablated kind, one per measure."""
    summary, rows = result.summary().set_index("metric"), []
    for measure in MEASURES:
        row, verdict = summary.loc[measure], result.verdict(measure)
        rows.append(
            (kind, measure, _method(result, measure, excluded))
            + tuple(float(row[c]) for c in COLUMNS[3:9])
            + (verdict.answer, str(verdict))
        )
    return rows


def _method(result: AblationResult, measure: str, excluded: str | None) -> str:
    """The cell's method, in words."""
    s = result.settings
    spared = f", sparing the top {excluded} heads" if excluded else ""
    judged = "few-shot accuracy on held-out tasks" if measure == "hits@1" else "ICL score"
    return (
        f"mean ablation (means over the reference rows) of the top {s['top']} ({s['scope']}) "
        f"by {result.by}{spared} vs "
        f"{s['random']} {s['baseline']} random draws; {judged} ({measure})"
    )
