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


def row_lines(frame: pd.DataFrame) -> dict[int, str]:
    """The tally's line for each context size, from the rendered file."""
    text = report(frame, ["Runs: x", "Last command: y", "Hardware: z"])
    return {int(line.split()[3]): line for line in text.splitlines() if line.startswith("- C = ")}


def test_the_tally_says_no_head_by_4x_when_every_finished_run_is_flat():
    c64 = [(cell, seed) for cell, seed in ORDER if cell.endswith("C64")]
    lines = row_lines(frame(set(c64)))
    assert lines[64].endswith(
        "8 of 8 runs finished): none placed an onset by 4x the law (8 flat with their training "
        "loss falling), so no head by 2x the grid's budget; whether one comes later or never, "
        "these runs cannot say."
    )
    assert lines[512] == "- C = 512 (B4-C512; 0 of 2 runs finished): pending."


def test_the_tally_says_late_heads_when_a_run_places_an_onset():
    c64 = [(cell, seed) for cell, seed in ORDER if cell.endswith("C64")]
    table = frame(set(c64))
    late = (table.cell == "B2-C64") & (table.seed == 1)
    table.loc[late, ["transition", "censored", "updates"]] = [True, False, 3e4]
    stalled = (table.cell == "B1-C64") & (table.seed == 0)
    table.loc[stalled, "train_loss_final"] = 5.9
    lines = row_lines(table)
    assert lines[64].endswith(
        "8 of 8 runs finished): 1 placed an onset by 4x the law (at 3.0x): late heads, not "
        "never; 6 flat with their training loss falling; 1 an optimisation failure."
    )
    assert "cannot say" not in lines[64]


def test_the_tally_makes_no_late_or_never_claim_when_every_finished_run_stalled():
    table = frame({("B1-C64", 1)})
    table["train_loss_final"] = 5.9  # every loss within 0.5 nats of its first
    (line,) = [text for size, text in row_lines(table).items() if size == 64]
    assert line.endswith(
        "1 of 8 runs finished): none placed an onset by 4x the law (1 an optimisation failure)."
    )
