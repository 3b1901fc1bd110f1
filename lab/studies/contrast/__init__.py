"""[B]'s contrast of natural text and Bi-Induct at matched compute, with seeds (three recipes: the
embedded corpus, vimdoc, the natural-text pilot's recipe).

Modules: ``run`` (the arms, training, the report), ``claims`` (the arm table and verdicts),
``docs`` (the natural-text recipe), ``snippets`` (the snippet scores), ``heads`` (which seeds
have a head; the induction-loss rise), ``task_drop`` ([B]'s quantity and the tasks' floor).
``python -m lab.studies contrast --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "contrast",
    __file__,
    (
        "RESULTS_papers_contrast.md",
        "RESULTS_papers_contrast.csv",
        "RESULTS_papers_contrast-vimdoc.md",
        "RESULTS_papers_contrast-vimdoc.csv",
        "RESULTS_papers_contrast-docs.md",
        "RESULTS_papers_contrast-docs.csv",
        "RESULTS_task_floor.csv",
    ),
)
