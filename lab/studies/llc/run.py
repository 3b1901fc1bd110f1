"""The LLC over the checkpoints of the demo run, beside its prefix-matching emergence: the
command line.

Estimates the LLC of :data:`studies.llc.cells.RUN` (:mod:`~studies.llc.measure`) and writes
``RESULTS_llc.md`` and ``RESULTS_llc.csv`` beside it (one row per checkpoint with the
diagnostics; :mod:`~studies.llc.claims`) and the figure ``llc.html`` into the run. Cached per
checkpoint: a rerun only samples new checkpoints. ``--report`` re-renders the results file from
the CSV, keeping the lines that need the run (its timing and settings, the stage sentence).
``.venv/bin/python -m lab.studies llc [--run DIR] [--chains 2] [--draws 100] [--report]``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from lab.studies.cli import OneLineParser
from lab.studies.llc import cells, claims
from lab.studies.study import recorded_header

OUT_MD = Path(__file__).with_name("RESULTS_llc.md")
OUT_CSV = Path(__file__).with_name("RESULTS_llc.csv")


def write(frame: pd.DataFrame, head: list[str], stage: str) -> None:
    text = claims.render(frame, head, stage)
    OUT_MD.write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m lab.studies llc")
    parser.add_argument("--run", default=str(cells.RUN))
    parser.add_argument("--chains", type=int, default=cells.CHAINS)
    parser.add_argument("--draws", type=int, default=cells.DRAWS)
    parser.add_argument("--report", action="store_true", help="only re-render from the CSV")
    args = parser.parse_args(argv)
    if args.report:
        recorded = OUT_MD.read_text()
        frame = pd.read_csv(OUT_CSV).drop(columns="command")
        return write(frame, recorded_header(recorded), claims.recorded_stage(recorded))
    import torch

    from ihprobe import SGLDSettings, run_meta
    from lab.studies.llc.measure import measure

    torch.set_num_threads(cells.THREADS)
    run = Path(args.run)
    settings = SGLDSettings(chains=args.chains, draws=args.draws)
    frame, stage, ps_point, seconds = measure(run, settings)
    command = ("python -m lab.studies llc " + shlex.join(argv or [])).strip()
    frame.assign(command=command).to_csv(OUT_CSV, index=False)
    n_beta = settings.beta(run_meta(run)["config"]["context"])
    head = claims.header(command, seconds, run.name, settings, n_beta)
    write(frame, head, claims.stage_sentence(stage, ps_point))


if __name__ == "__main__":
    main()
