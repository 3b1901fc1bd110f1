"""The LLC over the checkpoints of a demo run, beside its prefix-matching emergence.

Modules: ``run`` (the SGLD estimates and the report).
``python -m studies llc --help`` lists its options.
"""

from __future__ import annotations

from pathlib import Path

from studies.study import STUDIES, Study


def main(argv: list[str] | None = None) -> None:
    from studies.llc.run import main as run

    run(argv)


STUDY = Study(
    name="llc",
    question=STUDIES["llc"][1],
    folder=Path(__file__).resolve().parent,
    results=(
        "RESULTS_llc.md",
        "RESULTS_llc.csv",
    ),
    main=main,
)
