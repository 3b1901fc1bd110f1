"""Induction heads from natural text: the pilots, [A]'s b on natural text, and the exported
reference model.

Modules: ``run`` (the pilots, training, the report), ``law`` (b from two pilots), ``reference``
(``make reference``'s export).
``python -m lab.studies natural --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "natural",
    __file__,
    (
        "RESULTS_papers_natural.md",
        "RESULTS_papers_natural.csv",
    ),
)
