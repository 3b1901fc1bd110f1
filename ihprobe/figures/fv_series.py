"""FV scores in the pages of a series: the scan's heatmaps and the emergence report.

These views read what ``scan`` and ``trajectory`` computed (the ``fv`` head scores, the notes
of a scan that skipped it, the ``fv.clean_accuracy.TASK`` rows of a trajectory); nothing here
computes FV scores. A scan's page shows ``fv`` beside prefix matching
(:func:`ihprobe.figures.fv.fv_figure`), or, over several checkpoints, a slider; where ``fv`` was
asked for and skipped, the scan's note, once, naming the checkpoints it applies to.

>>> scan_fv_blocks([ihprobe.scan(model, ["prefix_matching", "fv"])])     # doctest: +SKIP
>>> fv_trajectory_note(ihprobe.trajectory("runs/demo", ["fv"]))          # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from ihprobe.figures.fv import fv_figure
from ihprobe.figures.heads import checkpoint_slider
from ihprobe.probes.scores import HeadScores

SKIPPED = "fv skipped"  # how a scan's note on a skipped fv begins (ihprobe.causal.fv.scan_fv)
ACCURACY = "fv.clean_accuracy."  # a trajectory's rows of each task's clean accuracy


def fv_frame(scores: HeadScores) -> pd.DataFrame:
    """A scan's ``fv`` as the rows :func:`~ihprobe.figures.fv.fv_figure` reads (task ``all``).

    >>> import torch
    >>> from ihprobe.io.provenance import Provenance
    >>> s = HeadScores({"fv": torch.tensor([[0.5, 0.0]])}, {}, Provenance("m"))
    >>> fv_frame(s).score.tolist()
    [0.5, 0.0]
    """
    grid = scores.head["fv"].double().cpu()
    return pd.DataFrame(
        [
            {"layer": layer, "head": head, "task": "all", "score": float(grid[layer, head])}
            for layer in range(grid.shape[0])
            for head in range(grid.shape[1])
        ]
    )


def skip_notes(series: list[HeadScores]) -> list[str]:
    """Each distinct note of a skipped ``fv`` in ``series``, one line each, naming the
    checkpoints it applies to when there are several (text: the page escapes it).

    >>> from ihprobe.io.provenance import Provenance
    >>> said = {"notes": ["fv skipped: no task is done above chance (2 tried)"]}
    >>> skip_notes([HeadScores({}, {}, Provenance("m", step=s), said) for s in (0, 8)])
    ['fv skipped: no task is done above chance (2 tried) (at step 0, step 8)']
    """
    found: dict[str, list[str]] = {}
    for i, scores in enumerate(series):
        for note in scores.settings.get("notes", []):
            if note.startswith(SKIPPED):
                found.setdefault(note, []).append(_checkpoint(scores, i))
    if len(series) == 1:
        return list(found)
    return [f"{note} (at {', '.join(where)})" for note, where in found.items()]


def scan_fv_blocks(series: list[HeadScores]) -> list:
    """What a scan's page shows of ``fv`` for one source's checkpoints: its skip notes, then
    the last checkpoint's FV scores beside its prefix matching (one checkpoint) or a slider
    over the checkpoints that have them (several); empty when ``fv`` was not asked for.

    Example:
        >>> blocks = scan_fv_blocks([ihprobe.scan(m, ["fv"])])            # doctest: +SKIP
    """
    blocks: list = skip_notes(series)
    having = [scores for scores in series if "fv" in scores.head]
    if len(having) == 1 and len(series) == 1:
        prefix = having[0].head.get("prefix_matching")
        blocks.append(fv_figure(fv_frame(having[0]), prefix))
    elif having:
        blocks.append(checkpoint_slider(having, "fv"))
    return blocks


def fv_trajectory_note(table: pd.DataFrame) -> str | None:
    """One line on the checkpoints of a trajectory where ``fv`` was asked for but has no scores
    (no task done above chance: its tasks' clean accuracies are there; no accuracy either: the
    model reads no text); None when every checkpoint has them, or ``fv`` was not asked for.

    >>> rows = [{"step": 0, "layer": None, "metric": "fv.clean_accuracy.t", "value": 0.1},
    ...         {"step": 8, "layer": 0, "metric": "fv", "value": 0.3},
    ...         {"step": 8, "layer": None, "metric": "fv.clean_accuracy.t", "value": 0.9}]
    >>> print(fv_trajectory_note(pd.DataFrame(rows)))  # doctest: +NORMALIZE_WHITESPACE
    fv skipped at 1 of 2 checkpoints: no task is done above chance at step 0 (clean accuracy at
    most 0.1).
    """
    metrics = table["metric"].astype(str)
    accuracy = table[metrics.str.startswith(ACCURACY)]
    asked = "fv" in set(metrics) or len(accuracy)
    if not asked:
        return None
    at = "step" if table["step"].notna().all() else "revision"
    scored = set(table.loc[metrics == "fv", at])
    every = list(dict.fromkeys(table[at]))
    missing = [c for c in every if c not in scored]
    if not missing:
        return None
    ran = set(accuracy[at])
    below = [c for c in missing if c in ran]
    silent = [c for c in missing if c not in ran]
    said = []
    if below:
        best = float(accuracy[accuracy[at].isin(below)]["value"].max())
        said.append(
            f"no task is done above chance at {_listed(at, below)} (clean accuracy at most "
            f"{best:.3g})"
        )
    if silent:
        said.append(f"no task ran at {_listed(at, silent)} (a model without a text tokenizer)")
    return f"fv skipped at {len(missing)} of {len(every)} checkpoints: {'; '.join(said)}."


def _listed(at: str, checkpoints: list, most: int = 8) -> str:
    """``step 0, step 8, ...``: at most ``most`` named, then how many more."""
    named = [f"{at} {c}" if at == "step" else str(c) for c in checkpoints[:most]]
    more = len(checkpoints) - most
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _checkpoint(scores: HeadScores, index: int) -> str:
    p = scores.provenance
    if p.step is not None:
        return f"step {p.step}"
    return str(p.revision or f"checkpoint {index}")
