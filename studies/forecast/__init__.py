"""The live emergence forecast on the demo configuration and the natural pilots, judged against its
prior.

Modules: ``run`` (training the demo seeds, replaying their probes, the report).
``python -m studies forecast --help`` lists its options.
"""

from __future__ import annotations

from pathlib import Path

from studies.study import STUDIES, Study


def main(argv: list[str] | None = None) -> None:
    from studies.forecast.run import main as run

    run(argv)


STUDY = Study(
    name="forecast",
    question=STUDIES["forecast"][1],
    folder=Path(__file__).resolve().parent,
    results=(
        "RESULTS_forecast.md",
        "RESULTS_forecast.csv",
        "RESULTS_forecast_natural.csv",
    ),
    main=main,
)
