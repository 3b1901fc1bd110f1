"""[A]'s size independence on natural text: one cell of the grid (B = 4, C = 256) at d_model 64,
128 and 256 and attention-only, declared before any run. Does the onset in updates move with
the model's size?

Each arm's onset (geometric mean over seeds, censored runs at their bound, Tobit) is compared
with d_model 128's, the recipe: [A]'s law says the same within 1.5x either way. Seeds 0-2 run
first; a ratio is a finding only at 5 seeds per arm, pending before.

>>> list(ARMS), ARMS["B4-C256-d64"]["d_model"], ARMS["B4-C256-ao"]["d_mlp"]
(['B4-C256', 'B4-C256-d64', 'B4-C256-d256', 'B4-C256-ao'], 64, 0)
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ihprobe.dynamics.law import censored_ratio
from ihprobe.dynamics.verdicts import judge, same_ratio
from ihprobe.jobs.grid import Grid
from studies.natural_law import RUNS, _base, _measure, report
from studies.natural_law.cells import CELLS
from studies.study import STUDIES, Study

CELL = "B4-C256"  # d_model 128: the grid's own cell and run
ARMS = {
    CELL: CELLS[CELL],
    f"{CELL}-d64": {**CELLS[CELL], "d_model": 64},
    f"{CELL}-d256": {**CELLS[CELL], "d_model": 256},
    f"{CELL}-ao": {**CELLS[CELL], "d_mlp": 0},
}
SEEDS = (0, 1, 2, 3, 4)
CLAIM = same_ratio(1.5)
LABELS = {
    CELL: "d_model 128",
    f"{CELL}-d64": "d_model 64",
    f"{CELL}-d256": "d_model 256",
    f"{CELL}-ao": "attention-only, d_model 128",
}


def ratio_lines(frame: pd.DataFrame) -> list[str]:
    """Each arm's onset over d_model 128's, with its verdict (pending below 5 seeds an arm)."""
    done = frame[frame.status == "done"] if "status" in frame else frame.iloc[:0]
    out = []
    for arm in list(ARMS)[1:]:
        rows = done[done.cell.isin([arm, CELL])]
        if rows.empty or rows.cell.nunique() < 2:
            out.append(f"- {LABELS[arm]} over d_model 128: pending (no finished run yet).")
            continue
        runs = rows.assign(censored=rows.censored.astype(bool), updates=rows.updates.astype(float))
        ratio = censored_ratio(runs, arm, CELL)
        verdict, _ = judge(ratio, CLAIM)
        out.append(
            f"- {LABELS[arm]} over d_model 128: {ratio.text('.2f')}: **{verdict}** "
            f"(rule: {CLAIM.says})."
        )
    return out


def _report(frame: pd.DataFrame, provenance: list[str]) -> str:
    provenance = [line.replace(report.SHARED, report.OURS) for line in provenance]
    lines = [
        "# [A]'s size independence on natural text: one cell, four sizes",
        "",
        *provenance,
        "",
        "## Declared design (written before the first run)",
        "",
        f"- Cell {CELL} of the natural-text grid (`RESULTS.md` beside this file: the same "
        "recipe, budget and onset rule); arms: d_model 64, 128 (the grid's own run) and 256 "
        "with MLPs (4 d_model wide), and attention-only at d_model 128.",
        f"- Claim: each arm's onset in updates over d_model 128's is {CLAIM.says} (Tobit "
        "ratio of geometric means, censored runs at their bound); a verdict at 5 seeds an "
        "arm, pending before; seeds 0-2 run first.",
        "",
        "## Runs",
        "",
        *report._markdown(report.run_table(frame, "natural_size")),
        "",
        "## Onset against size",
        "",
        *ratio_lines(frame),
        "",
    ]
    return "\n".join(lines)


STUDY = Study(
    name="natural_size",
    question=STUDIES["natural_size"][1],
    folder=Path(__file__).resolve().parent,
    results=("RESULTS_size.md", "results_size.csv"),
    grid=Grid(RUNS, _base(), ARMS, seeds=SEEDS),
    measure=_measure,
    report=_report,
)
