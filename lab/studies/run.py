"""The shared command line of a study declared as data (a grid, a measure, a report):
``--list``, ``--cell C --seed S`` (train or reuse, measure, record, report) and ``--report``.

>>> parser("demo").parse_args(["--cell", "B4", "--seed", "2"]).seed
[2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ihprobe.jobs.grid import (
    Provenance,
    read_result,
    recorded_provenance,
    report_lock,
    saved_results,
    status_row,
    write_record,
    write_result,
)
from lab.studies.cli import OneLineParser
from lab.studies.study import Study, provenance


def parser(name: str) -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"python -m lab.studies {name}")
    p.add_argument("--list", action="store_true", help="print the cells and exit")
    p.add_argument("--cell", action="append", help="a cell to run (repeatable)")
    p.add_argument("--seed", type=int, action="append", help="a seed to run (repeatable)")
    p.add_argument("--report", action="store_true", help="only re-render the results file")
    return p


def record(study: Study) -> pd.DataFrame:
    """The CSV of record: one row per cell and seed of the grid, a finished run's result from its
    folder, else the row the CSV already holds (its folder gone), else pending."""
    saved = saved_results(study.csv)
    rows = []
    for cell, seed in pairs(study, saved):
        result = read_result(study.grid.folder(cell, seed))
        row = status_row({"cell": cell, "seed": seed}, result)
        rows.append(saved.get((cell, seed), row) if result is None else row)
    return pd.DataFrame(rows)


def pairs(study: Study, saved: dict) -> list[tuple[str, int]]:
    """The grid's declared (cell, seed) pairs, then any other seed of a declared cell that has
    run (a finished folder, or a row the CSV keeps): a seed run beyond the declared ones is
    recorded, never dropped."""
    declared = study.grid.pairs()
    extra = {key for key in saved if key not in declared and key[0] in study.grid.cells}
    for cell in study.grid.cells:
        for folder in sorted(Path(study.grid.root, cell).glob("seed*")):
            seed = folder.name[4:]
            if seed.isdigit() and read_result(folder) is not None:
                extra.add((cell, int(seed)))
    extra -= set(declared)
    order = {cell: i for i, cell in enumerate(study.grid.cells)}
    return declared + sorted(extra, key=lambda k: (k[1], order[k[0]]))


def write(study: Study, frame: pd.DataFrame, provenance: Provenance | list[str]) -> None:
    """Write the CSV of record and the results file (``provenance``: whose lines it starts with)."""
    lines = provenance.lines() if isinstance(provenance, Provenance) else list(provenance)
    write_record(study.csv, frame, study.md, study.report(frame, lines))


def run_one(study: Study, cell: str, seed: int) -> dict:
    """Train or reuse one cell and seed, measure it once (``result.json``) and return the row."""
    folder, seconds, how = study.grid.run(cell, seed)
    result = read_result(folder)
    if result is None:
        result = {"train_s": seconds, **study.measure(folder, cell, seed)}
        write_result(folder, result)
    print(f"{study.name} {cell} seed {seed}: {how}", file=sys.stderr)
    return result


def main(study: Study, argv: list[str]) -> None:
    """Run the shared command line of ``study``."""
    args = parser(study.name).parse_args(argv)
    if args.list:
        for cell, fields in study.grid.cells.items():
            print(cell, " ".join(f"{k}={v}" for k, v in fields.items()))
        return
    if not args.report:
        for cell in args.cell or list(study.grid.cells):
            for seed in args.seed or list(study.grid.seeds):
                run_one(study, cell, seed)
    with report_lock(study.csv):
        frame = record(study)
        kept = recorded_provenance(study.md) if args.report else None
        write(study, frame, kept or provenance(study.name, "--cell CELL --seed SEED"))
