"""The LLC over the checkpoints of a demo run, beside its prefix-matching emergence.

Modules: ``run`` (the SGLD estimates and the report).
``python -m studies llc --help`` lists its options.
"""

from __future__ import annotations

from studies.study import scripted

STUDY = scripted(
    "llc",
    __file__,
    (
        "RESULTS_llc.md",
        "RESULTS_llc.csv",
    ),
)
