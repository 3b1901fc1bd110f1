"""The law grid's checks that need no training, on run folders outside the grid:
``RESULTS_papers_law_halves_other.md``, drawn from one CSV of record per set of runs
(``python -m lab.studies.law.halves --cell NAME --csv ROWS RUN...`` writes the rows; ``python -m
studies law --report`` re-renders the file with the grid's).

Each set is data (:data:`SETS`): the cell its runs are refitted as, its CSV, and what the runs
are; the tables and verdicts are :func:`studies.law.halves.one_cell_lines` of its rows.

>>> [s.cell for s in SETS]
['demo-B32-C64', 'natural-recipe']
>>> SETS[1].csv
('RESULTS_papers_law_halves_natural.csv', 'RESULTS_papers_law_halves_natural_grid.csv')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lab.studies.law.halves import one_cell_lines

MD = "RESULTS_papers_law_halves_other.md"
HALVES = "nice -n 19 .venv/bin/python benchmarks/papers_law_halves.py"  # as the sets were run


@dataclass(frozen=True)
class RunSet:
    """Finished run folders refitted as one set: ``heading`` of its section, ``cell`` its
    name, ``csv`` its rows beside this file (one CSV a batch of folders, each batch its own
    cell in the tables, the between-seed spread pooled within them), ``command`` how they were
    made (and ``made_by``: which study trained the folders), ``runs`` what the runs are."""

    heading: str
    cell: str
    csv: tuple[str, ...]
    command: str
    made_by: str
    runs: str


SETS = (
    RunSet(
        "The forecast validation's 5 demo seeds",
        "demo-B32-C64",
        ("RESULTS_papers_law_halves_demo.csv",),
        f"{HALVES} --cell demo-B32-C64 --long --csv benchmarks/RESULTS_papers_law_halves_demo.csv "
        "runs/validate-forecast-demo/B32-seed{0,1,2,3,4}",
        "(from the repository root; the folders are trained by `benchmarks/validate_forecast.py`)",
        "the demo configuration (2-layer GPT-NeoX d64, 4 heads, `repeats` over 64 random tokens, "
        "B 32, C 64, AdamW 3e-3 constant, 500 updates, 20 *linear* checkpoints 25 updates "
        "apart, so each half has 10 checkpoints 50 updates apart), seeds 0-4.",
    ),
    RunSet(
        "The natural-text recipe d128-lr3e-3: the pilot's 3 seeds and the grid's B4-C256 5 seeds",
        "natural-recipe",
        ("RESULTS_papers_law_halves_natural.csv", "RESULTS_papers_law_halves_natural_grid.csv"),
        f"{HALVES} --cell natural-d128-lr3e-3 --long --csv "
        "benchmarks/RESULTS_papers_law_halves_natural.csv "
        "runs/validate-papers/natural/d128-lr3e-3/seed{0,1,2}` (2026-12-01), then "
        "`nice -n 3 .venv/bin/python -m lab.studies.law.halves --cell natural-B4-C256 --long --csv "
        "lab/studies/law/RESULTS_papers_law_halves_natural_grid.csv "
        "runs/studies/law-natural/B4-C256/seed{0,1,2,3,4}",
        "(2026-12-05; the pilot's folders were trained by "
        "`benchmarks/validate_papers_natural.py`, the grid's by `python -m studies natural_law` "
        "and `natural_size`; only read here)",
        "2-layer GPT-NeoX d128, 4 heads, the documentation corpus under a 512-id BPE, B 4, "
        "C 256, lr 3e-3 constant after a 1% warm-up. The pilot (`natural-d128-lr3e-3` in the "
        "tables): linear checkpoints 1,221 updates apart; seed 0 ran 29,297 updates (30M "
        "tokens), seeds 1 and 2 were extended to 43,283 (44M tokens); its seeds 3 and 4 have "
        "no checkpoints left. The grid's cell (`natural-B4-C256`), the same recipe trained "
        "again: 28,855 updates (2x the law), checkpoints about 902 updates apart, seeds 0-4. "
        "The two batches are two cells in the halves table, the between-seed spread pooled "
        "within them; the probe's length and the forecast are judged over both "
        "(`natural-recipe`). "
        "n = C/2 = 128.",
    ),
)

HEAD = [
    "# Interleaved halves, n = C/2 and the replayed forecast on runs outside the law grid "
    "(issue 24, without training)",
    "",
    "The law grid's own run folders are refitted by `python -m lab.studies law --halves` (its "
    "section in `RESULTS_papers_law.md`). While they train, the same checks (method in "
    "`lab/studies/law/halves.py` and `lab/studies/law/forecast.py`) ran on two "
    "sets of finished runs, each a cell (or cells) whose between-seed spread is that of the "
    "runs' own full fits. The trajectories (n = 16 and n = C/2, 50 rows) are cached in each "
    "folder's `trajectory-cache`; nothing is trained. Hardware: 2-core CPU shared with "
    "training jobs; run on the dates beside each command.",
    "",
]


def render(folder: Path) -> str:
    """The results file from each set's CSV in ``folder``."""
    lines = list(HEAD)
    for s in SETS:
        frame = pd.concat([pd.read_csv(folder / name) for name in s.csv], ignore_index=True)
        frame["grid"] = s.cell  # one recipe: the probe's length judged over all its runs
        lines += [
            f"## {s.heading}",
            "",
            f"Command: `{s.command}` {s.made_by}.",
            "",
            f"Runs: {s.runs}",
            "",
            *one_cell_lines(frame, s.cell, " and ".join(f"`{name}`" for name in s.csv)),
        ]
    return "\n".join(lines)
