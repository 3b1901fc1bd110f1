"""[A]'s emergence law on natural text: one wide (B, C) grid, one fit, onsets from the curves.

Modules: ``cells`` (the declared grid and recipe), ``measure`` (one run's onset, censoring and
head check), ``claims`` (the Tobit fit, its verdicts, r in tokens, lack of fit), ``report``
(the results file), ``figure`` (observed against predicted onsets), ``sensitivity`` and
``extend`` (checks added after the data: other readings, and still-rising runs continued in a
copy), ``posthoc`` (the pilots' seeds re-read), ``size`` (the size arm) and ``queue`` (a lent
GPU's queue).
``python -m lab.studies natural_law --list`` lists its cells.
"""

from __future__ import annotations

from pathlib import Path

from ihprobe import TrainConfig
from ihprobe.jobs.grid import Grid
from lab.studies.study import ROOT, STUDIES, Study


def _base() -> TrainConfig:
    from ihprobe.data import default_directory
    from lab.studies.natural_law.cells import RECIPE, VOCAB

    options = {"text": str(default_directory() / "train"), "vocab_size": VOCAB}
    return TrainConfig(out=str(RUNS), producer_options=options, **RECIPE)


RUNS = ROOT / "runs" / "studies" / "law-natural"


def _grid() -> Grid:
    from lab.studies.natural_law.cells import CELLS, SEEDS

    return Grid(RUNS, _base(), CELLS, seeds=SEEDS)


def _measure(folder: Path, cell: str, seed: int) -> dict:
    from lab.studies.natural_law.measure import measure

    return measure(folder, cell, seed)


def _report(frame, provenance: list[str]) -> str:
    from lab.studies.natural_law.report import report

    return report(frame, provenance)


STUDY = Study(
    name="natural_law",
    question=STUDIES["natural_law"][1],
    folder=Path(__file__).resolve().parent,
    results=("RESULTS.md", "results.csv"),
    grid=_grid(),
    measure=_measure,
    report=_report,
)
