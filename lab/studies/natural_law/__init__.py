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
from lab.studies.natural_law.cells import CELLS, SEEDS
from lab.studies.study import ROOT, STUDIES, Study


def _base() -> TrainConfig:
    from ihprobe.data import default_directory
    from lab.studies.natural_law.cells import RECIPE, VOCAB

    options = {"text": str(default_directory() / "train"), "vocab_size": VOCAB}
    return TrainConfig(out=str(RUNS), producer_options=options, **RECIPE)


RUNS = ROOT / "runs" / "studies" / "law-natural"


def _measure(folder: Path, cell: str, seed: int) -> dict:
    from lab.studies.natural_law.measure import measure

    return measure(folder, cell, seed)


def _report(frame, provenance: list[str]) -> str:
    from lab.studies.natural_law.report import report

    return report(frame, provenance)


def grid_study(name: str, results, cells, seeds, report, *, runs=RUNS, measure=_measure) -> Study:
    """A study of this folder: ``cells`` x ``seeds`` trained on the grid's recipe
    (:func:`_base`) under ``runs`` and read by ``measure`` (the grid's by default), its question
    from the studies' table, its results files (markdown, CSV) beside this file.

    >>> study = grid_study("natural_late", ("R.md", "r.csv"), {"B1-C64": {}}, (1,), report=None)
    >>> study.grid.pairs(), study.folder.name
    ([('B1-C64', 1)], 'natural_law')
    """
    return Study(
        name=name,
        question=STUDIES[name][1],
        folder=Path(__file__).resolve().parent,
        results=results,
        grid=Grid(runs, _base(), cells, seeds=seeds),
        measure=measure,
        report=report,
    )


STUDY = grid_study("natural_law", ("RESULTS.md", "results.csv"), CELLS, SEEDS, _report)
