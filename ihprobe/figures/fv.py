"""Function-vector (FV) scores in a report: each head's FV score beside its prefix matching.

The caller computes the scores (``ihprobe.fv_scores``: a pass per head and prompt, far more
than a scan) and hands this view the :class:`~ihprobe.causal.fv_result.FVResult` or its
``to_frame()``; nothing here computes them. A report that does not compute them says why in one
line (:func:`fv_note`).

>>> section = fv_section(ihprobe.fv_scores(model), prefix)                # doctest: +SKIP
>>> write_report("fv.html", "FV heads", [section])                        # doctest: +SKIP
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import torch

from ihprobe.causal.fv_result import MIN_EFFECT, RELATIVE_FLOOR, SIGNIFICANCE, FVResult
from ihprobe.core.errors import IhprobeError
from ihprobe.figures.report import Section, how_to_read
from ihprobe.probes.engine import reads_text

HOWTO = {
    "FV score": "the head's average indirect effect (Todd et al. 2024): its mean last-token "
    "output over clean few-shot prompts, patched into prompts whose labels are shuffled, raises "
    "the answer's probability by this much, averaged over the prompts and then over the tasks "
    "done above chance. 0 is no effect; it can be negative.",
    "FV head": f"score above 0 by a one-sided t-test at {SIGNIFICANCE:g} / heads, and at least "
    f"max({MIN_EFFECT:g}, {RELATIVE_FLOOR:g} x the top head's score).",
    "prefix matching": "how much the head attends, on repeated random tokens, to the token after "
    "the current token's earlier copy (0..1): the induction signature, read from attention "
    "alone. A head can score high on one and low on the other.",
    "used": "whether the task counts: clean accuracy above chance (always guessing the most "
    f"common answer token) by a one-sided binomial test at {SIGNIFICANCE:g}.",
}


def fv_grid(fv: FVResult | pd.DataFrame) -> torch.Tensor:
    """The ``[layer, head]`` FV scores of an ``FVResult`` or of its ``to_frame()`` (the rows of
    task ``"all"``); NaN where no task is above chance.

    >>> frame = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "task": "all",
    ...                       "score": [0.1, 0.0, 0.4, 0.2]})
    >>> fv_grid(frame).tolist()
    [[0.1, 0.0], [0.4, 0.2]]
    """
    if isinstance(fv, FVResult):
        return fv.scores.detach().double().cpu()
    if not isinstance(fv, pd.DataFrame) or not {"layer", "head", "task", "score"} <= set(fv):
        raise IhprobeError(
            "fv must be an FVResult or its to_frame() (columns layer, head, task, score); got "
            f"{type(fv).__name__}."
        )
    rows = fv[fv["task"] == "all"]
    if rows.empty:
        raise IhprobeError("fv's frame has no rows of task 'all' (the FV score); pass to_frame().")
    grid = torch.full(
        (int(rows["layer"].max()) + 1, int(rows["head"].max()) + 1),
        math.nan,
        dtype=torch.float64,
        device="cpu",  # a host table for the figure
    )
    for layer, head, score in zip(rows["layer"], rows["head"], rows["score"], strict=True):
        grid[int(layer), int(head)] = float(score)
    return grid


def fv_heads_frame(fv: FVResult, prefix: torch.Tensor | None = None, k: int = 10) -> pd.DataFrame:
    """The ``k`` best heads by FV score: ``head, FV score, FV head, prefix matching``.

    Example:
        >>> fv_heads_frame(result, prefix, k=3)                           # doctest: +SKIP
    """
    found = {(a, b) for a, b, _ in fv.fv_heads()}
    rows = []
    for layer, head, score in fv.top_heads(k):
        row = {"head": f"L{layer}H{head}", "FV score": score}
        row["FV head"] = "yes" if (layer, head) in found else ""
        if prefix is not None:
            row["prefix matching"] = float(prefix[layer, head])
        rows.append(row)
    return pd.DataFrame(rows)


def fv_tasks_frame(fv: FVResult) -> pd.DataFrame:
    """One row per task: ``task, used, clean accuracy, chance, p``.

    Example:
        >>> fv_tasks_frame(result).columns.tolist()                       # doctest: +SKIP
        ['task', 'used', 'clean accuracy', 'chance', 'p']
    """
    return pd.DataFrame(
        [
            {
                "task": t.name,
                "used": "yes" if t.above_chance else "no",
                "clean accuracy": t.accuracy,
                "chance": t.chance,
                "p": t.p_value,
            }
            for t in fv.tasks
        ]
    )


def fv_figure(fv: FVResult | pd.DataFrame, prefix: torch.Tensor | None = None) -> go.Figure:
    """FV scores (diverging colours, 0 white) beside prefix matching (0..1), layer x head.

    Example:
        >>> fv_figure(result, prefix).data[0].type                        # doctest: +SKIP
        'heatmap'
    """
    grid = fv_grid(fv)
    panels = [("FV score", grid)] + ([("prefix matching", prefix)] if prefix is not None else [])
    from plotly.subplots import make_subplots  # here: a scan without fv never pays its import

    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=[t for t, _ in panels], horizontal_spacing=0.2
    )
    finite = grid[~torch.isnan(grid)]
    reach = max(float(finite.abs().max()) if len(finite) else 0.0, 1e-9)
    for col, (name, values) in enumerate(panels, start=1):
        scale = (
            {"colorscale": "RdBu", "zmid": 0, "zmin": -reach, "zmax": reach}
            if name == "FV score"
            else {"colorscale": "Viridis", "zmin": 0, "zmax": 1}
        )
        bar = {"x": 0.4 if col == 1 and len(panels) == 2 else 1.0, "len": 0.9}
        z = values.detach().double().cpu().tolist()
        fig.add_trace(
            go.Heatmap(z=z, colorbar=bar, name=name, hovertemplate="L%{y}H%{x}: %{z:.3f}", **scale),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="head", dtick=1, row=1, col=col)
        fig.update_yaxes(title_text="layer", dtick=1, autorange="reversed", row=1, col=col)
    fig.update_layout(height=320, template="plotly_white", title="FV score and prefix matching")
    return fig


def fv_section(
    fv: FVResult, prefix: torch.Tensor | None = None, *, title: str = "Function-vector heads"
) -> Section:
    """A report section: the summary, the top heads (FV score beside prefix matching), both as
    heatmaps, the tasks and a "How to read this" box. Every string is text (escaped).

    Example:
        >>> write_report("fv.html", "FV", [fv_section(result, prefix)])   # doctest: +SKIP
    """
    if not isinstance(fv, FVResult):
        raise IhprobeError(f"fv must be an FVResult (ihprobe.fv_scores); got {type(fv).__name__}.")
    blocks: list = list(fv.summary().splitlines()[:1])
    s = fv.settings
    blocks.append(
        f"{s.get('shots')} shots, {s.get('prompts')} clean and as many label-shuffled prompts "
        f"per task, seed {s.get('seed')}, computed by the {s.get('method')} path."
    )
    if fv.used:
        blocks += [fv.summary().splitlines()[-1], fv_heads_frame(fv, prefix), fv_figure(fv, prefix)]
    else:
        blocks.append(
            "No task is done above chance, so no head has an FV score (nothing to restore)."
        )
    blocks += [fv_tasks_frame(fv), how_to_read(HOWTO)]
    return Section(title, blocks)


def fv_note(model) -> str:
    """The one line a report that did not compute FV scores shows, saying why: the model reads
    no text, or nobody asked (they cost far more than a scan).

    >>> from ihprobe.core.standin import id_tokenizer
    >>> class Ids:
    ...     tokenizer = id_tokenizer(16)
    >>> fv_note(Ids())[:31]
    'FV scores: skipped: this model '
    """
    if not reads_text(getattr(model, "tokenizer", None)):
        return (
            "FV scores: skipped: this model reads token ids only (no text tokenizer), so no "
            "few-shot task prompt can be written for it."
        )
    return (
        "FV scores: not computed (they cost a last-token pass per head and prompt, far more "
        "than prefix matching); `ihprobe fv CHECKPOINT --html FILE` writes them beside it."
    )
