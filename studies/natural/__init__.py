"""Induction heads from natural text: the pilots, [A]'s b on natural text, and the exported
reference model.

Modules: ``run`` (the pilots, training, the report), ``law`` (b from two pilots), ``reference``
(``make reference``'s export).
``python -m studies natural --help`` lists its options.
"""

from __future__ import annotations

from pathlib import Path

from studies.study import STUDIES, Study


def main(argv: list[str] | None = None) -> None:
    from studies.natural.run import main as run

    run(argv)


STUDY = Study(
    name="natural",
    question=STUDIES["natural"][1],
    folder=Path(__file__).resolve().parent,
    results=(
        "RESULTS_papers_natural.md",
        "RESULTS_papers_natural.csv",
    ),
    main=main,
)
