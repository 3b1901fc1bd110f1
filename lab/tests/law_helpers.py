"""Synthetic law-study frames for the lab's tests: every cell of the law grid done, its
emergence drawn from a known law."""

from __future__ import annotations

import numpy as np
import pandas as pd


def law_frame(b: float, c: float, seeds=None) -> pd.DataFrame:
    """Every cell of issue 15's grid done, its emergence from U = 1e5 / (B^b C^c) with a few %
    seed noise (the size and schedule cells at the base cell's point, whatever their size);
    the issue-24 cells pending. ``seeds``: the seeds done (all of them by default)."""
    from lab.studies.law import cells as law_cells
    from lab.studies.law import run as law

    seeds = law_cells.SEEDS if seeds is None else seeds
    rng = np.random.default_rng(0)
    rows = []
    for name, cell in law_cells.cells().items():
        for seed in law_cells.SEEDS:
            done = seed in seeds and name not in law_cells.EXPERIMENTS
            updates = 1e5 / (cell["B"] ** b * cell["C"] ** c) * rng.lognormal(0, 0.03)
            rows.append(
                {
                    "cell": name,
                    "seed": seed,
                    "grid": cell["grid"],
                    "B": cell["B"],
                    "C": cell["C"],
                    "status": "done" if done else "pending",
                    "transition": True,
                    "censored": False,
                    "updates": updates,
                    "steps": 1e6,
                    "budget_factor": 1,
                    "first_run": None,
                }
            )
    return law.tidy(pd.DataFrame(rows))


def fit_text(frame, grid="semi-natural", fixed=None) -> str:
    """The law study's fit sentences for one grid of ``frame``, as one string."""
    from lab.studies.law import report

    names = frame[frame.grid == grid].cell.unique()
    return " ".join(report.fit_lines(frame, grid, names, fixed=fixed))
