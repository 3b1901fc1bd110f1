"""Post hoc (added after the data): runs still rising at their last probe, continued past the
declared budget to ``EXTENDED_X`` times the law's updates, in a copy of their folder under
``runs/studies/law-natural-extended/``, so the declared runs stay exactly as they ended. A
finished continuation is read by the declared onset rule into ``results_extended.csv`` beside
this file (its record: the results re-render from it); the sensitivity section reads that, and
no verdict uses it.

``python -m lab.studies.natural_law.extend B2-C64 B4-C64`` continues those cells' seed 0 (a killed
continuation resumes; a finished one is reused).

>>> EXTENDED_X, EXTENDED.name
(3.0, 'law-natural-extended')
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import ihprobe
from lab.studies.atomic import write_csv
from lab.studies.natural_law import RUNS
from lab.studies.natural_law.cells import CELLS, budget
from lab.studies.natural_law.measure import onset_row, probe_records

EXTENDED_X = 3.0  # the continued budget, in multiples of the law's updates
EXTENDED = RUNS.parent / "law-natural-extended"
RECORD = Path(__file__).resolve().parent / "results_extended.csv"


def folder(cell: str, seed: int = 0) -> Path:
    return EXTENDED / cell / f"seed{seed}"


def extend(cell: str, seed: int = 0) -> Path:
    """Copy ``cell``'s declared run (once) and train the copy on to ``EXTENDED_X`` x the law."""
    from lab.studies.study import load

    grid = load("natural_law").grid
    source, target = grid.folder(cell, seed), folder(cell, seed)
    if not target.exists():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("result.json", "*.lock"))
    c = CELLS[cell]
    steps = budget(c["batch_size"], c["context"], EXTENDED_X)
    config = replace(grid.config(cell, seed), out=str(target), steps=steps, resume=True)
    return ihprobe.train(config)


def reading(cell: str, seed: int = 0) -> dict | None:
    """The declared onset rule on a finished continuation's probes: its onset row, its last
    update and max PS (None where the cell was not continued to the end)."""
    run = folder(cell, seed)
    records = probe_records(run)
    meta = ihprobe.run_meta(run) if run.is_dir() else None
    if not records or not meta or records[-1]["step"] < meta["config"]["steps"]:
        return None
    c = CELLS[cell]
    row = onset_row(records, c["batch_size"], c["context"])
    most = max(r["max_prefix_matching"] for r in records)
    return {"cell": cell, "seed": seed, **row, "last": records[-1]["step"], "max_ps": most}


def record(row: dict) -> None:
    """Write ``row`` into :data:`RECORD`, replacing the cell and seed's earlier row."""
    import pandas as pd

    old = pd.read_csv(RECORD) if RECORD.is_file() else pd.DataFrame(columns=["cell", "seed"])
    keep = old[~((old.cell == row["cell"]) & (old.seed == row["seed"]))]
    frame = pd.concat([keep, pd.DataFrame([row])], ignore_index=True)
    write_csv(RECORD, frame.sort_values(["cell", "seed"]))


def continued(cell: str, seed: int = 0) -> dict | None:
    """A finished continuation's row of :data:`RECORD` (None where there is none)."""
    import pandas as pd

    if not RECORD.is_file():
        return None
    rows = pd.read_csv(RECORD).query("cell == @cell and seed == @seed")
    return None if rows.empty else rows.iloc[0].to_dict()


def main(argv: list[str] | None = None) -> int:
    cells = sys.argv[1:] if argv is None else argv
    unknown = [cell for cell in cells if cell not in CELLS]
    if not cells or unknown:
        said = f"not cells of the grid: {', '.join(unknown)}" if unknown else "none given"
        print(f"error: name the cells to continue, e.g. B2-C64 ({said})", file=sys.stderr)
        return 2
    for cell in cells:
        extend(cell)
        record(reading(cell))
        print(f"natural_law {cell} seed 0: continued to {EXTENDED_X:g}x the law", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
