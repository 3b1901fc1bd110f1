"""The live emergence forecast on the demo configuration and the natural pilots, judged against its
prior.

Modules: ``run`` (training the demo seeds, replaying their probes, the report).
``python -m studies forecast --help`` lists its options.
"""

from __future__ import annotations

from studies.study import scripted

STUDY = scripted(
    "forecast",
    __file__,
    (
        "RESULTS_forecast.md",
        "RESULTS_forecast.csv",
        "RESULTS_forecast_natural.csv",
    ),
)
