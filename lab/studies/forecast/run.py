"""The live emergence forecast on the demo configuration (README "Validation"): the command line.

Trains the runs of :mod:`studies.forecast.cells` (five demo seeds with live probes and two
earlier runs that play the user's ``--law-from`` runs), replays each seed's probes through the
forecaster and judges it against its prior alone, retrospectively
(:mod:`~studies.forecast.measure`): after 10%, 30% and 50% of the run, does its 80% interval
cover the measured emergence point, and how wide is it, against the prior's own 80% interval.
Coverage gets a Clopper-Pearson 95% interval over seeds (:mod:`~studies.forecast.claims`).

``--natural`` judges the same way, only reading them, every finished natural-text pilot run
with live probes (``lab/studies/natural``, ``runs/validate-papers/natural``) and the natural grid's
runs of the same recipe (:data:`GRID`) against the published law alone at its B and C: rows in
``RESULTS_forecast_natural.csv`` (a run whose folder is gone keeps its rows), a section of
``RESULTS_forecast.md`` (rewritten in place; the demo's part stays). ``--report`` re-renders
``RESULTS_forecast.md`` from both CSVs, keeping the lines above its tables that only the run
folders hold (wall times, the earlier runs, the refitted prior).

Every run is resumable: rerunning reuses finished runs and continues unfinished ones. From the
repository root: ``nice -n 15 .venv/bin/python -m lab.studies forecast [--seeds 0 1 2 3 4]``.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from lab.studies.cli import OneLineParser
from lab.studies.forecast import cells, claims
from lab.studies.study import ROOT, recorded_header

NATURAL = ROOT / "runs" / "validate-papers" / "natural"
# the natural grid's cell that trains the first pilot's recipe again (folder, cell)
GRID = (ROOT / "runs" / "studies" / "law-natural", "B4-C256")
OUT_MD = Path(__file__).with_name("RESULTS_forecast.md")
OUT_CSV = Path(__file__).with_name("RESULTS_forecast.csv")
NATURAL_CSV = Path(__file__).with_name(claims.NATURAL_CSV)


def natural_table() -> pd.DataFrame:
    return pd.read_csv(NATURAL_CSV) if NATURAL_CSV.is_file() else pd.DataFrame()


def write(table: pd.DataFrame, head: list[str]) -> None:
    """The results file from the demo seeds' rows and the natural pilots' CSV."""
    text = claims.render(table, natural_table(), head)
    OUT_MD.write_text(text)
    print(text)


def natural(root: Path, grid: tuple[Path, str] = GRID) -> None:
    """Judge every finished pilot run and the grid's runs of the same recipe against the
    published law alone; save the rows (keeping those of runs whose folders are gone) and
    rewrite the natural section of ``RESULTS_forecast.md``."""
    from lab.studies.forecast.measure import NATURAL_PRIOR, natural_rows

    table = pd.DataFrame(natural_rows(root) + natural_rows(*grid))
    kept = natural_table()
    if not kept.empty:
        done = set(zip(table.get("pilot", []), table.get("seed", []), strict=True))
        gone = [(p, s) not in done for p, s in zip(kept.pilot, kept.seed, strict=True)]
        table = pd.concat([kept[gone], table], ignore_index=True)
    table["prior"] = NATURAL_PRIOR  # rows of record named it per pilot; the prior is the same
    table.to_csv(NATURAL_CSV, index=False)
    text = OUT_MD.read_text() if OUT_MD.is_file() else ""
    kept = text.split(claims.NATURAL_HEADING)[0].rstrip("\n")
    OUT_MD.write_text("\n".join([kept, "", *claims.natural_lines(table)]))
    print("\n".join(claims.natural_lines(table)))


def report() -> None:
    """Re-render the results file from the CSVs of record (the lines above its tables kept)."""
    table = pd.read_csv(OUT_CSV).drop(columns="command")
    write(table, recorded_header(OUT_MD.read_text()))


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m lab.studies forecast")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(cells.SEEDS))
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-forecast-demo"))
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--natural", action="store_true", help="only judge the natural pilots")
    parser.add_argument("--report", action="store_true", help="only re-render from the CSVs")
    args = parser.parse_args(argv)
    if args.report:
        return report()
    if args.natural:
        return natural(NATURAL)
    import torch

    from lab.studies.forecast import measure

    begin = time.perf_counter()
    torch.set_num_threads(cells.THREADS)
    runs = measure.train_all(Path(args.out), args.seeds)
    if args.train_only:
        return
    priors = measure.priors(runs)
    rows = [row for s in args.seeds for row in measure.check_seed(s, runs[f"seed{s}"], priors)]
    command = "nice -n 15 .venv/bin/python -m lab.studies forecast " + shlex.join(sys.argv[1:])
    table = pd.DataFrame(rows)
    facts = {
        "train_s": sum(measure.wall_seconds(r) for r in runs.values()),
        "wall_s": time.perf_counter() - begin,
        "earlier": [measure.earlier_run(runs[name]) for name in cells.LAW_FROM],
    }
    write(table, claims.header(table, command.strip(), priors, facts))
    table.assign(command=command.strip()).to_csv(OUT_CSV, index=False)


if __name__ == "__main__":
    main()
