"""The :class:`Study` type and the table of studies.

>>> sorted(STUDIES)[:2]
['contrast', 'forecast']
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ihprobe.jobs.grid import Grid, Provenance, hardware, recorded_provenance, report_header

ROOT = Path(__file__).resolve().parents[2]  # the repository root: runs/ and results paths

# name -> (module that defines ``STUDY``, the question it asks); modules import on demand
STUDIES: dict[str, tuple[str, str]] = {
    "law": ("lab.studies.law", "[A]'s emergence law on semi-natural data, with seeds"),
    "contrast": (
        "lab.studies.contrast",
        "[B]'s contrast of natural text and Bi-Induct, with seeds",
    ),
    "natural": ("lab.studies.natural", "induction heads from natural text: the pilots"),
    "natural_law": (
        "lab.studies.natural_law",
        "[A]'s emergence law on natural text: a (B, C) grid",
    ),
    "natural_size": ("lab.studies.natural_law.size", "[A]'s size independence on natural text"),
    "natural_late": ("lab.studies.natural_law.late", "late or never: flat cells run to 4x the law"),
    "forecast": ("lab.studies.forecast", "the live emergence forecast against its prior"),
    "toy_law": ("lab.studies.toy_law", "the emergence law at toy scale on CPU"),
    "llc": ("lab.studies.llc", "the LLC over the demo run's checkpoints"),
    "fv_training": ("lab.studies.fv_training", "FV heads beside induction heads over training"),
}


@dataclass(frozen=True)
class Study:
    """One study: what it asks, its cells and seeds, what it measures, how it reports.

    ``grid``: its cells x seeds as data (None for a study of runs it does not train itself).
    ``measure(run_folder, cell, seed) -> dict``: the numbers of one finished run (its row).
    ``report(frame, provenance) -> str``: the results file from the CSV of record, claims
    judged inside (``provenance``: the lines that say who ran the runs, this process's or
    those the results file recorded; :func:`ihprobe.jobs.grid.report_header` takes them).
    ``main(argv)``: the study's own command line, when it needs more
    than the shared one (``lab/studies/run.py``). ``results``: its results files (markdown and CSV),
    relative to its folder, the markdown first.
    """

    name: str
    question: str
    folder: Path
    results: Sequence[str] = ()
    grid: Grid | None = None
    measure: Callable[[Path, str, int], dict] | None = None
    report: Callable[[pd.DataFrame, list[str]], str] | None = None
    main: Callable[[list[str] | None], object] | None = None

    @property
    def md(self) -> Path:
        return self.folder / self.results[0]

    @property
    def csv(self) -> Path:
        return self.folder / self.results[1]


def scripted(name: str, init_file: str, results: Sequence[str]) -> Study:
    """A study with a command line of its own (``lab/studies/NAME/run.py``'s ``main``), declared
    from its package's ``__init__.py`` (``init_file``: that file's ``__file__``).

    >>> scripted("llc", "lab/studies/llc/__init__.py", ("R.md", "r.csv")).folder.name
    'llc'
    """

    def main(argv: list[str] | None = None) -> object:
        return importlib.import_module(f"lab.studies.{name}.run").main(argv)

    folder = Path(init_file).resolve().parent
    return Study(name, STUDIES[name][1], folder, tuple(results), main=main)


def load(name: str) -> Study:
    """The study called ``name`` (its module imported now)."""
    if name not in STUDIES:
        raise KeyError(f"unknown study {name!r}; choose one of {', '.join(STUDIES)}.")
    return importlib.import_module(STUDIES[name][0]).STUDY


def launcher() -> str:
    """How this process was started, as the results files say it: with its own niceness.

    >>> launcher().endswith(".venv/bin/python -m lab.studies")
    True
    """
    niceness = os.nice(0)
    return f"{f'nice -n {niceness} ' if niceness else ''}.venv/bin/python -m lab.studies"


def provenance(name: str, unit: str) -> Provenance:
    """This process: how one run of study ``name`` is launched (``unit``: its options) and the
    command that runs now."""
    python = launcher()
    command = f"{python} {shlex.join(sys.argv[1:])}" if sys.argv[1:] else f"{python} {name}"
    return Provenance(runs=f"{python} {name} {unit}", command=command, hardware=hardware())


def recorded_header(text: str) -> list[str]:
    r"""The lines a results file holds above its first table: what a study's ``--report`` keeps
    when they state what only its run folders hold (wall times, the runs' own settings).

    >>> recorded_header("# T\n\nran in 5 s\n\n| a |\n| --- |\n| 1 |\n")
    ['# T', '', 'ran in 5 s', '']
    """
    lines = text.split("\n")
    return lines[: next((i for i, line in enumerate(lines) if line.startswith("| ")), len(lines))]


def header(name: str, title: str, unit: str, frame: pd.DataFrame, md: Path, rerender: bool):
    """The first lines of a study's results file. ``rerender`` (``--report``): the tables are
    drawn again from the CSV of record and no run changed, so the provenance lines the file
    records stay; otherwise this process's (:func:`provenance`)."""
    kept = recorded_provenance(md) if rerender else None
    return report_header(title, kept or provenance(name, unit), frame)
