"""The emergence law at toy scale on CPU: periodic random tokens over a small (B, C) grid.

Modules: ``cells`` (the grid as data), ``periodic`` (the data), ``measure`` (training and
the emergence points), ``claims`` (the refit judged, the results file), ``run`` (the command
line).
``python -m lab.studies toy_law --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "toy_law",
    __file__,
    (
        "RESULTS_law.md",
        "RESULTS_law.csv",
    ),
)
