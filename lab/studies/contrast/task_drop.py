"""[B]'s quantity: the relative drop in few-shot ICL task accuracy under top-2% head ablation,
and whether any built-in task is above floor for these models at all.

[B] reports how much in-context-learning accuracy falls, relative to the clean model, when the
top 2% of heads are ablated (-22.6% natural-only against -4.9% Bi-Induct at 0.13B). The contrast
measures it, for runs measured from now on, in [B]'s per-layer ablation on the tasks
``ihprobe.ablate`` scores by default (the seven of ``ihprobe.causal.tasks``): per task the clean
HITS@1 and its relative drop, and over the tasks the relative drop of the mean HITS@1
(:func:`columns`). The committed rows were measured before this and their checkpoints are gone,
so they cannot be measured again.

A drop means nothing where the clean accuracy sits at floor. :func:`measure_floor` scores every
built-in task's clean HITS@1 (the seven and the word tasks of ``ihprobe.causal.word_tasks``; 5
shots, 24 prompts, as in the ablation) on the committed natural-text reference model
``reference/natural-docs`` (the recipe's natural arm) with ``ihprobe.fv_scores``, against its
chance, the HITS@1 of always guessing the task's most common answer token: a task is above floor
when it beats chance and the one-sided binomial p of its hits under chance is at most
:data:`ALPHA` over the number of tasks (Bonferroni). ``python -m lab.studies contrast --recipe
docs --task-floor`` writes it to :data:`FLOOR_CSV`; the results file renders it
(:func:`section`).

>>> table = pd.DataFrame({"task": ["a", "b"], "prompts": [24, 24], "hits@1": [0.0, 0.5],
...     "chance": [0.1, 0.1], "p_value": [1.0, 1e-6], "above_floor": [False, True]})
>>> floor_sentence(table)[:46]
'Above floor on reference/natural-docs: 1 of 2 '
>>> floor_sentence(table.head(1))[:44]
'No task is above floor on reference/natural-'
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import ihprobe
from ihprobe.dynamics.verdicts import t_mean
from ihprobe.jobs.grid import markdown
from lab.studies.atomic import write_csv

HERE = Path(__file__).resolve().parent
FLOOR_CSV = HERE / "RESULTS_task_floor.csv"
REFERENCE = HERE.parents[2] / "reference" / "natural-docs"
ALPHA = 0.05  # family-wise, split over the tasks (Bonferroni)
SHOTS, PROMPTS = 5, 24  # as the ablation's task prompts (ihprobe.causal.tasks' defaults)
DROP = "per-layer:hits@1_relative_drop"  # [B]'s quantity over the tasks
FLOOR_HELP = (
    "with --recipe docs: score every built-in task's clean HITS@1 on reference/natural-docs "
    "into RESULTS_task_floor.csv, then rewrite the results files"
)


def columns(summary: pd.DataFrame) -> dict:
    """The per-layer ablation's task columns from its ``summary()``: clean HITS@1/3 and ICL
    score and HITS@1's change over the tasks, and [B]'s quantity: per task the clean HITS@1 and
    its relative drop (NaN at a clean 0), and the relative drop of the mean HITS@1.

    >>> rows = pd.DataFrame({"metric": ["hits@1", "hits@3", "icl_score", "hits@1:a", "hits@1:b"],
    ...     "clean": [0.25, 0.5, 1.0, 0.5, 0.0], "change": [-0.125, 0.0, 0.0, -0.25, 0.0]})
    >>> out = columns(rows)
    >>> out["hits@1"], out["per-layer:hits@1_change"], out[DROP]
    (0.25, -0.125, 0.5)
    >>> [out[f"per-layer:hits@1_{k}"] for k in ("clean:a", "drop:a", "drop:b")]
    [0.5, 0.5, nan]
    """
    rows = summary.set_index("metric")
    out = {m: float(rows.loc[m, "clean"]) for m in ("hits@1", "hits@3", "icl_score")}
    out["per-layer:hits@1_change"] = float(rows.loc["hits@1", "change"])
    for metric in [m for m in rows.index if m.startswith("hits@1:")]:
        clean, change = float(rows.loc[metric, "clean"]), float(rows.loc[metric, "change"])
        name = metric.split(":", 1)[1]
        out[f"per-layer:hits@1_clean:{name}"] = clean
        out[f"per-layer:hits@1_drop:{name}"] = -change / clean if clean > 0 else float("nan")
    clean = out["hits@1"]
    out[DROP] = -out["per-layer:hits@1_change"] / clean if clean > 0 else float("nan")
    return out


def measure_floor(model, seed: int = 0) -> pd.DataFrame:
    """Each built-in task's clean HITS@1 on ``model`` (the ablation's prompts), its chance, the
    one-sided binomial p of its hits under chance, and whether it is above floor."""
    found = ihprobe.fv_scores(model, shots=SHOTS, prompts=PROMPTS, seed=seed).tasks
    return pd.DataFrame(
        [
            {
                "task": t.name,
                "prompts": len(t.clean_hits),
                "hits@1": t.accuracy,
                "chance": t.chance,
                "p_value": min(1.0, t.p_value),  # a float sum may overshoot 1
                "above_floor": bool(t.accuracy > t.chance and t.p_value <= ALPHA / len(found)),
            }
            for t in found
        ]
    )


def write_floor(path: Path = FLOOR_CSV, reference: Path = REFERENCE) -> pd.DataFrame:
    """Measure :func:`measure_floor` on the reference model and write it to ``path``."""
    table = measure_floor(ihprobe.load(reference))
    write_csv(path, table)
    return table


def floor_sentence(table: pd.DataFrame) -> str:
    """Whether any task is above floor, naming each task's baseline HITS@1 and chance."""
    each = "; ".join(
        f"{r.task} {r['hits@1']:.3g} (chance {r.chance:.3g}, p {r.p_value:.2g})"
        for _, r in table.iterrows()
    )
    above = table[table.above_floor.astype(bool)]
    if len(above):
        return (
            f"Above floor on reference/natural-docs: {len(above)} of {len(table)} tasks "
            f"({', '.join(above.task)}); [B]'s quantity can be read on those. Baseline HITS@1 "
            f"of each: {each}."
        )
    return (
        f"No task is above floor on reference/natural-docs: each of the {len(table)} tasks' "
        f"baseline HITS@1 (against its chance) is {each}. A relative drop from floor carries "
        "no signal, so [B]'s quantity cannot be measured on these models with these tasks."
    )


def drop_table(frame: pd.DataFrame, arms) -> pd.DataFrame:
    """Per arm: [B]'s quantity (mean [t 95%] over the done seeds that record it)."""
    rows = []
    for arm in arms:
        done = frame[(frame.arm == arm) & (frame.status == "done")]
        v = done[DROP].to_numpy(float) if DROP in done else np.array([])
        v = v[np.isfinite(v)]
        rows.append({"arm": arm, "relative drop of HITS@1, every task": t_mean(v).text()})
    return pd.DataFrame(rows)


def section(frame: pd.DataFrame, arms, floor: Path = FLOOR_CSV) -> list[str]:
    """The results file's section on [B]'s quantity and the tasks' floor."""
    recorded = DROP in frame and np.isfinite(frame[DROP].to_numpy(float)).any()
    lines = [
        "## [B]'s quantity: the relative drop in ICL task accuracy under top-2% ablation",
        "",
        "[B] reports the relative drop in few-shot ICL task accuracy when the top 2% of heads",
        "are ablated. The contrast measures it for runs measured from now on, in the per-layer",
        "ablation, on each task `ihprobe.ablate` scores (the seven of `ihprobe.causal.tasks`)",
        "and over them (`lab/studies/contrast/task_drop.py`).",
        "",
    ]
    if recorded:
        lines += [*markdown(drop_table(frame, arms)), ""]
    else:
        lines += [
            "No row of the results CSV records it: the committed rows were measured before it,",
            "and their runs' checkpoints are gone, so they cannot be measured again.",
            "",
        ]
    if not floor.is_file():
        return [*lines, f"Task floor: not measured yet (`{floor.name}`).", ""]
    table = pd.read_csv(floor)
    shown = pd.DataFrame(
        {
            "task": table.task,
            "prompts": table.prompts,
            "clean HITS@1": table["hits@1"].map("{:.3g}".format),
            "chance": table.chance.map("{:.3g}".format),
            "p (binomial, one-sided)": table.p_value.map("{:.2g}".format),
            "above floor": table.above_floor.astype(bool).map({True: "yes", False: "no"}),
        }
    )
    return [
        *lines,
        "Every built-in task's clean HITS@1 on `reference/natural-docs`, the recipe's natural",
        f"model (`{floor.name}`, by `ihprobe.fv_scores`: the seven and the word tasks; {SHOTS}",
        f"shots, {PROMPTS} prompts, as in the ablation), against its chance (always guessing the",
        "task's most common answer token); above floor when it beats chance and the one-sided",
        f"binomial p is at most {ALPHA:g} / {len(table)} (Bonferroni over the tasks).",
        "",
        *markdown(shown),
        "",
        floor_sentence(table),
        "",
    ]
