"""[B]'s contrast of natural text and Bi-Induct at matched compute, with seeds (three recipes: the
embedded corpus, vimdoc, the natural-text pilot's recipe).

Modules: ``run`` (the arms, training, the report), ``claims`` (the arm table and verdicts),
``docs`` (the natural-text recipe), ``snippets`` (the snippet scores).
``python -m studies contrast --help`` lists its options.
"""

from __future__ import annotations

from pathlib import Path

from studies.study import STUDIES, Study


def main(argv: list[str] | None = None) -> None:
    from studies.contrast.run import main as run

    run(argv)


STUDY = Study(
    name="contrast",
    question=STUDIES["contrast"][1],
    folder=Path(__file__).resolve().parent,
    results=(
        "RESULTS_papers_contrast.md",
        "RESULTS_papers_contrast.csv",
        "RESULTS_papers_contrast-vimdoc.md",
        "RESULTS_papers_contrast-vimdoc.csv",
        "RESULTS_papers_contrast-docs.md",
        "RESULTS_papers_contrast-docs.csv",
    ),
    main=main,
)
