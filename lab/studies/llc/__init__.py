"""The LLC over the checkpoints of a demo run, beside its prefix-matching emergence.

Modules: ``cells`` (the run and the sampler as data), ``measure`` (the SGLD estimates and
the change points), ``claims`` (the checks, the stage sentence, the results file), ``run`` (the
command line).
``python -m lab.studies llc --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "llc",
    __file__,
    (
        "RESULTS_llc.md",
        "RESULTS_llc.csv",
    ),
)
