"""The emergence law at toy scale on CPU: periodic random tokens over a small (B, C) grid.

Modules: ``run`` (the grid, training, the report), ``periodic`` (the data).
``python -m studies toy_law --help`` lists its options.
"""

from __future__ import annotations

from pathlib import Path

from studies.study import STUDIES, Study


def main(argv: list[str] | None = None) -> None:
    from studies.toy_law.run import main as run

    run(argv)


STUDY = Study(
    name="toy_law",
    question=STUDIES["toy_law"][1],
    folder=Path(__file__).resolve().parent,
    results=(
        "RESULTS_law.md",
        "RESULTS_law.csv",
    ),
    main=main,
)
