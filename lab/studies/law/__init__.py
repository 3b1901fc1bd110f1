"""[A]'s emergence law on [A]'s kind of data (semi-natural rows), with seeds: cells over B and C,
the i.i.d. control, width, learning rate, warm-up, the interleaved halves and the probe's
length.

Modules: ``run`` (the cells, training, the report), ``claims`` (tables and verdicts),
``control`` (the i.i.d. cell), ``halves``, ``probe_length`` and ``forecast`` (checks that need
no training), ``other`` (those checks on run sets outside the grid, as data), ``regime`` (the
repeat share the grid matches).
``python -m lab.studies law --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "law",
    __file__,
    (
        "RESULTS_papers_law.md",
        "RESULTS_papers_law.csv",
        "RESULTS_papers_law_halves.csv",
        "RESULTS_papers_law_halves_other.md",
        "RESULTS_papers_law_halves_demo.csv",
        "RESULTS_papers_law_halves_natural.csv",
        "RESULTS_papers_law_halves_natural_grid.csv",
    ),
)
