"""The emergence law at toy scale on CPU: periodic random tokens over a small (B, C) grid.

Modules: ``run`` (the grid, training, the report), ``periodic`` (the data).
``python -m studies toy_law --help`` lists its options.
"""

from __future__ import annotations

from studies.study import scripted

STUDY = scripted(
    "toy_law",
    __file__,
    (
        "RESULTS_law.md",
        "RESULTS_law.csv",
    ),
)
