"""Late or never? Flat natural-grid runs, run on to 4x the law (declared 2026-12-06, post hoc).

The grid's Tobit fit reads every flat run as a late onset, but one seed per cell cannot tell a
late head from one that never forms: B4-C512 stayed flat while both its neighbours formed a
head, and the between-seed spread is about 0.3 decades. So, declared before any of these runs:
a second seed (seed 1) and seed 0 again, each trained to ``LATE_X`` times the law's updates (the
grid's recipe otherwise), in the cheapest cells of the C = 64 row and in B4-C512, all flat at
their 2x budget. Seed 0's declared folders are gone here, so it is trained again from the start
(the same seed and recipe) rather than continued. B8-C64, the C = 64 row's next cell (flat at
2x too), was added on 2026-12-07, before any of its runs: B4-C512 at 4x (77M tokens) needs more
than a CPU session and waits for a GPU. Each run is read by the grid's onset rule:

- a run that places an onset before ``LATE_X`` x the law is **late** (with its onset over the
  law's prediction);
- a run flat through it is **not by 4x**; if its training loss also stalled (the last logged
  loss within ``STALL`` nats of the first logged one), an **optimisation failure**, not a head
  that would come later.

No run here enters the law fit: the section reports them beside it, post hoc.

>>> [c for c in LATE_CELLS], LATE_X
(['B1-C64', 'B2-C64', 'B4-C64', 'B8-C64', 'B4-C512'], 4.0)
>>> reading({"status": "done", "transition": True, "censored": False, "updates": 3e4,
...          "law_updates": 1e4, "train_loss_first": 6.0, "train_loss_final": 3.0})
'late: onset at 3.0x the law'
>>> reading({"status": "done", "transition": False, "censored": True, "updates": 4e4,
...          "law_updates": 1e4, "train_loss_first": 6.2, "train_loss_final": 6.1})
'not by 4x, and its loss stalled (6.2 to 6.1 nats): an optimisation failure'
>>> reading({"status": "pending"})
'pending'
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from lab.studies.natural_law import RUNS, _measure, grid_study
from lab.studies.natural_law.cells import CELLS, LAW_X, budget

LATE_X = 4.0
STALL = 0.5  # nats: a loss that fell less than this from its first log has not trained
LATE_CELLS = {
    cell: {
        **CELLS[cell],
        "steps": budget(CELLS[cell]["batch_size"], CELLS[cell]["context"], LATE_X),
    }
    for cell in ("B1-C64", "B2-C64", "B4-C64", "B8-C64", "B4-C512")  # cheapest first
}
SEEDS = (1, 0)  # seed 1 first: the second seed is the question
LATE = RUNS.parent / "law-natural-late"


def measure(run: Path, cell: str, seed: int) -> dict:
    """The grid's measure, plus the first logged training loss (for the stall reading)."""
    row = _measure(run, cell, seed)
    lines = (Path(run) / "metrics.jsonl").read_text().splitlines()
    row["train_loss_first"] = json.loads(lines[0])["loss"] if lines else math.nan
    return row


def reading(row: dict) -> str:
    """Late, not by 4x, or an optimisation failure (see the module docstring)."""
    if row.get("status") != "done":
        return "pending"
    if row["transition"] and not row["censored"]:
        return f"late: onset at {row['updates'] / row['law_updates']:.1f}x the law"
    first, final = row.get("train_loss_first", math.nan), row.get("train_loss_final", math.nan)
    if first - final < STALL:
        return (
            f"not by {LATE_X:g}x, and its loss stalled ({first:.1f} to {final:.1f} nats): an "
            "optimisation failure"
        )
    return f"not by {LATE_X:g}x (loss {first:.1f} to {final:.1f} nats): no head by then"


def tally(frame: pd.DataFrame) -> list[str]:
    """One line for each context size the cells share: how many of its finished runs placed an
    onset by ``LATE_X`` x the law, and what the rest say (a count, no fit).

    >>> rows = [{"cell": "B1-C64", "seed": s, "status": "done", "transition": False,
    ...          "censored": True, "train_loss_first": 6.0, "train_loss_final": 3.0}
    ...         for s in (0, 1)]
    >>> print(tally(pd.DataFrame(rows))[0])  # doctest: +NORMALIZE_WHITESPACE
    - C = 64 (B1-C64, B2-C64, B4-C64, B8-C64; 2 of 8 runs finished): none placed an onset by 4x
    the law (2 flat with their training loss falling), so no head by 2x the grid's budget;
    whether one comes later or never, these runs cannot say.
    """
    lines = []
    for context in sorted({cells["context"] for cells in LATE_CELLS.values()}):
        names = [c for c, cells in LATE_CELLS.items() if cells["context"] == context]
        rows = frame[frame.cell.isin(names)].to_dict("records")
        done = [r for r in rows if r.get("status") == "done"]
        said = [reading(r) for r in done]
        late = [r for r, text in zip(done, said, strict=True) if text.startswith("late")]
        failed = sum("optimisation failure" in text for text in said)
        flat = len(done) - len(late) - failed
        runs = len(names) * len(SEEDS)
        head = f"- C = {context} ({', '.join(names)}; {len(done)} of {runs} runs finished):"
        if not done:
            lines.append(f"{head} pending.")
            continue
        rest = [f"{flat} flat with their training loss falling"] if flat else []
        rest += [f"{failed} an optimisation failure"] if failed else []
        if late:
            at = ", ".join(f"{r['updates'] / r['law_updates']:.1f}x" for r in late)
            lines.append(
                f"{head} {len(late)} placed an onset by {LATE_X:g}x the law (at {at}): late "
                "heads, not never" + "".join(f"; {part}" for part in rest) + "."
            )
        else:
            lines.append(
                f"{head} none placed an onset by {LATE_X:g}x the law ({'; '.join(rest)})"
                + (
                    f", so no head by {LATE_X / LAW_X:g}x the grid's budget; whether one comes "
                    "later or never, these runs cannot say"
                    if flat
                    else ""
                )
                + "."
            )
    return lines


def report(frame: pd.DataFrame, provenance: list[str]) -> str:
    lines = ["# Late or never? Flat natural-grid cells run on to 4x the law", "", *provenance, ""]
    lines += [(__doc__ or "").split(">>>")[0].strip(), "", "| cell | seed | steps | reading |"]
    lines += ["| --- | --- | --- | --- |"]
    for row in frame.to_dict("records"):
        steps = LATE_CELLS[row["cell"]]["steps"]
        lines.append(f"| {row['cell']} | {row['seed']} | {steps} | {reading(row)} |")
    lines += ["", "By context size (a count of the readings above):", "", *tally(frame)]
    done = frame[frame.status == "done"] if "status" in frame else frame.iloc[:0]
    finished = {(r["cell"], int(r["seed"])) for r in done.to_dict("records")}
    order = [(c, s) for s in SEEDS for c in LATE_CELLS]  # seed 1 of every cell first
    waiting = [run for run in order if run not in finished]
    if waiting:
        cell, seed = waiting[0]
        where = (
            " They run in the device job's GPU queue (`lab/studies/natural_law/queue.py`) or one "
            f"at a time on a CPU, the next: `python -m lab.studies natural_late --cell {cell} "
            f"--seed {seed}` (hours of a core each)."
        )
    else:
        where = ""
    lines += ["", f"{len(done)} of {len(frame)} runs finished.{where}", ""]
    return "\n".join(lines)


STUDY = grid_study(
    "natural_late",
    ("RESULTS_late.md", "results_late.csv"),
    LATE_CELLS,
    SEEDS,
    report,
    runs=LATE,
    measure=measure,
)
