"""The late study's results file names the next run to start, seed 1 of every cell first, and
no command once every run has finished."""

from __future__ import annotations

import pandas as pd

from lab.studies.natural_law.late import LATE_CELLS, SEEDS, report

ORDER = [(cell, seed) for seed in SEEDS for cell in LATE_CELLS]


def frame(done: set[tuple[str, int]]) -> pd.DataFrame:
    flat = {"transition": False, "censored": True, "updates": 4e4, "law_updates": 1e4}
    flat |= {"train_loss_first": 6.0, "train_loss_final": 3.0}
    rows = [
        {"cell": c, "seed": s, "status": "pending"}
        | (flat | {"status": "done"} if (c, s) in done else {})
        for c in LATE_CELLS
        for s in SEEDS
    ]
    return pd.DataFrame(rows)


def last_line(done: set[tuple[str, int]]) -> str:
    text = report(frame(done), ["Runs: x", "Last command: y", "Hardware: z"])
    return text.strip().splitlines()[-1]


def test_the_next_run_is_the_first_unfinished_in_seed_one_first_order():
    for finished in range(len(ORDER)):
        line = last_line(set(ORDER[:finished]))
        cell, seed = ORDER[finished]
        assert line.startswith(f"{finished} of {len(ORDER)} runs finished.")
        assert f"--cell {cell} --seed {seed}`" in line


def test_no_command_once_every_run_finished():
    assert last_line(set(ORDER)) == f"{len(ORDER)} of {len(ORDER)} runs finished."
