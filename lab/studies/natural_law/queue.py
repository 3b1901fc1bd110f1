"""The natural-text grid's queue for a lent GPU: K runs at a time on one device until a time
budget is spent, each one resumable (a run killed at the deadline resumes next time).

``python -m lab.studies.natural_law.queue --per-device 8 --seconds 300`` trains, in this order, the
size arm's runs (seed by seed; its d_model 256 arm costs a CPU core two hours a run), the GPU
cells' first seeds (the wide corners, cheapest first), then a second seed of every cell (CPU
cells first), skipping finished ones (here, or done in the CSVs of record: runs trained on
a CPU elsewhere, whose folders do not travel to the device); each run is one ``python -m
lab.studies STUDY --cell C --seed S`` process, so its result is measured and recorded like any
other.

>>> todo = pending(finished=set())
>>> todo[0], todo[len(SIZE)], todo[len(SIZE) + len(LATE)]
(('natural_size', 'B4-C256', 0), ('natural_late', 'B1-C64', 1), ('natural_law', 'B1-C1024', 0))
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from lab.studies.cli import OneLineParser
from lab.studies.natural_law import late
from lab.studies.natural_law.cells import CELLS, GPU_CELLS
from lab.studies.natural_law.size import ARMS, SEEDS

SIZE = [("natural_size", arm, seed) for seed in SEEDS for arm in ARMS]
LATE = [("natural_late", cell, seed) for seed in late.SEEDS for cell in late.LATE_CELLS]
GRID = [("natural_law", cell, 0) for cell in GPU_CELLS] + [("natural_law", c, 1) for c in CELLS]


def pending(finished: set[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """(study, cell, seed) runs still to run on a GPU, in the order above."""
    return [run for run in SIZE + LATE + GRID if run not in finished]


def run_command(study: str, cell: str, seed: int) -> list[str]:
    """The process that trains and records one run (the CLI of ``lab/studies``).

    >>> run_command("natural_late", "B4-C64", 1)[1:]
    ['-m', 'lab.studies', 'natural_late', '--cell', 'B4-C64', '--seed', '1']
    """
    return [sys.executable, "-m", "lab.studies", study, "--cell", cell, "--seed", str(seed)]


def finished_runs() -> set[tuple[str, str, int]]:
    """Runs with a result beside their checkpoints, and runs the studies' CSVs of record hold
    as done: those trained elsewhere, whose folders do not travel to the device."""
    from ihprobe.jobs.grid import read_result, saved_results
    from lab.studies.study import load

    studies = {name: load(name) for name in ("natural_law", "natural_size", "natural_late")}
    every = SIZE + LATE + GRID + [("natural_law", cell, 0) for cell in CELLS]
    here = {r for r in every if read_result(studies[r[0]].grid.folder(*r[1:])) is not None}
    recorded = {(n, c, int(s)) for n, st in studies.items() for c, s in saved_results(st.csv)}
    return here | recorded


def warm_corpus() -> None:
    """Tokenize the grid's corpus once, here, so that K runs started at once find it cached
    instead of each building it (a copied cache whose text files kept their paths and times is
    found as it is)."""
    from ihprobe.data import load_corpus
    from lab.studies.study import load

    options = load("natural_law").grid.base.producer_options
    begin = time.monotonic()
    load_corpus(text=options["text"], vocab_size=options["vocab_size"])
    print(f"natural_law queue: corpus ready in {time.monotonic() - begin:.1f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m lab.studies.natural_law.queue")
    p.add_argument("--per-device", type=int, default=8, help="runs at once on the device")
    p.add_argument("--seconds", type=float, default=300, help="stop starting runs after this")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = p.parse_args(argv)
    todo = pending(finished_runs())
    if args.dry_run:
        for study, cell, seed in todo:
            print(" ".join(["python", *run_command(study, cell, seed)[1:]]))
        return 0
    warm_corpus()
    deadline = time.monotonic() + args.seconds
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    running: list[subprocess.Popen] = []
    while (todo or running) and time.monotonic() < deadline:
        running = [r for r in running if r.poll() is None]
        while todo and len(running) < args.per_device:
            study, cell, seed = todo.pop(0)
            running.append(subprocess.Popen(run_command(study, cell, seed), env=env))
        time.sleep(1)
    for r in running:  # the budget is spent: each resumes from its last state next time
        r.terminate()
    for r in running:
        r.wait()
    print(f"natural_law queue: {len(pending(finished_runs()))} runs left", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
