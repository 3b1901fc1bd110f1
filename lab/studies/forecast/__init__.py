"""The live emergence forecast on the demo configuration and the natural pilots, judged against its
prior.

Modules: ``cells`` (the runs as data), ``measure`` (training, replaying the probes, judging
each forecast), ``claims`` (coverage and width against the prior, the results file), ``run``
(the command line).
``python -m lab.studies forecast --help`` lists its options.
"""

from __future__ import annotations

from lab.studies.study import scripted

STUDY = scripted(
    "forecast",
    __file__,
    (
        "RESULTS_forecast.md",
        "RESULTS_forecast.csv",
        "RESULTS_forecast_natural.csv",
    ),
)
