"""The law grid's checks that need no training, on run folders outside the grid:
``RESULTS_papers_law_halves_other.md``, drawn from one CSV of record per set of runs
(``python -m studies.law.halves --cell NAME --csv ROWS RUN...`` writes the rows; ``python -m
studies law --report`` re-renders the file with the grid's).

Each set is data (:data:`SETS`): the cell its runs are refitted as, its CSV, and what the runs
are; the tables and verdicts are :func:`studies.law.halves.one_cell_lines` of its rows.

>>> [s.cell for s in SETS]
['demo-B32-C64', 'natural-d128-lr3e-3']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from studies.law.halves import one_cell_lines

MD = "RESULTS_papers_law_halves_other.md"
HALVES = "nice -n 19 .venv/bin/python benchmarks/papers_law_halves.py"  # as the sets were run


@dataclass(frozen=True)
class RunSet:
    """Finished run folders refitted as one cell: ``heading`` of its section, ``cell`` its
    name in the tables, ``csv`` its rows beside this file, ``command`` how they were made (and
    ``made_by``: which study trained the folders), ``runs`` what the runs are."""

    heading: str
    cell: str
    csv: str
    command: str
    made_by: str
    runs: str


SETS = (
    RunSet(
        "The forecast validation's 5 demo seeds",
        "demo-B32-C64",
        "RESULTS_papers_law_halves_demo.csv",
        f"{HALVES} --cell demo-B32-C64 --long --csv benchmarks/RESULTS_papers_law_halves_demo.csv "
        "runs/validate-forecast-demo/B32-seed{0,1,2,3,4}",
        "(from the repository root; the folders are trained by `benchmarks/validate_forecast.py`)",
        "the demo configuration (2-layer GPT-NeoX d64, 4 heads, `repeats` over 64 random tokens, "
        "B 32, C 64, AdamW 3e-3 constant, 500 updates, 20 *linear* checkpoints 25 updates "
        "apart, so each half has 10 checkpoints 50 updates apart), seeds 0-4.",
    ),
    RunSet(
        "The natural-text pilot d128-lr3e-3, 3 seeds",
        "natural-d128-lr3e-3",
        "RESULTS_papers_law_halves_natural.csv",
        f"{HALVES} --cell natural-d128-lr3e-3 --long --csv "
        "benchmarks/RESULTS_papers_law_halves_natural.csv "
        "runs/validate-papers/natural/d128-lr3e-3/seed{0,1,2}",
        "(the folders are trained by `benchmarks/validate_papers_natural.py`, only read here)",
        "2-layer GPT-NeoX d128, 4 heads, natural text (512-id BPE), B 4, C 256, lr 3e-3 "
        "constant, linear checkpoints 1,221 updates apart; seed 0 ran 29,297 updates (30M "
        "tokens), seeds 1 and 2 were extended to 43,283 (44M tokens). n = C/2 = 128.",
    ),
)

HEAD = [
    "# Interleaved halves, n = C/2 and the replayed forecast on runs outside the law grid "
    "(issue 24, without training)",
    "",
    "The law grid's own run folders are refitted by `python -m studies law --halves` (its "
    "section in `RESULTS_papers_law.md`). While they train, the same checks (method in "
    "`studies/law/halves.py` and `studies/law/forecast.py`) ran on two "
    "sets of finished runs, each taken as one cell whose between-seed spread is that of the "
    "runs' own full fits. The trajectories (n = 16 and n = C/2, 50 rows) are cached in each "
    "folder's `trajectory-cache`; nothing is trained. Hardware: 2-core CPU shared with "
    "training jobs; run on 2026-12-01.",
    "",
]


def render(folder: Path) -> str:
    """The results file from each set's CSV in ``folder``."""
    lines = list(HEAD)
    for s in SETS:
        frame = pd.read_csv(folder / s.csv)
        lines += [
            f"## {s.heading}",
            "",
            f"Command: `{s.command}` {s.made_by}.",
            "",
            f"Runs: {s.runs}",
            "",
            *one_cell_lines(frame, s.cell, s.csv),
        ]
    return "\n".join(lines)
