"""The paper reproductions: one folder per study, one entry point (``python -m lab.studies``).

A study asks one question of a grid of training runs and answers it in its results files: its
``RESULTS*.md`` (tables and verdicts) rendered from its CSV of record. The library does the work:
the grid runner (:mod:`ihprobe.jobs.grid`: cells x seeds, train / resume / reuse, the CSV of
record), the law's fits (:mod:`ihprobe.dynamics.law`) and the claim grammar
(:mod:`ihprobe.dynamics.verdicts`). A study folder holds its cells as data, what it measures on
a finished run, its claims and its results files.

``python -m lab.studies --list`` names the studies; ``python -m lab.studies NAME --help`` shows one
study's options (``--list``, ``--cell C --seed S``, ``--report``).
"""

from __future__ import annotations

from lab.studies.study import ROOT, STUDIES, Study, load

__all__ = ["ROOT", "STUDIES", "Study", "load"]
