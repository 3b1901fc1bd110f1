"""What one finished run of the FV training study measures (see the package docstring).

- ``onset``: the induction onset by the natural grid's rule (live probes' max prefix matching).
- ``series``: at every ``FV_EVERY``-th checkpoint and the last, each head's prefix matching and
  FV score, the FV heads (``FVResult.fv_heads``; beside them the heads significant without its
  effect floor), and each task's clean accuracy, chance and whether it is used: JSON,
  one record per checkpoint (:func:`checkpoint_record`).
- ``kind_*``: ``ihprobe.kind_table`` on the last checkpoint, one group of columns per cell
  (ablated kind x measure): the change, the load-bearing index with its 95% interval, and
  the answer; ``kind_error`` holds the one line that says why there is no table (e.g. no task
  above chance to rank FV heads by).

>>> kind_columns(None, "no task above chance")["kind_error"]
'no task above chance'
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import ihprobe
from ihprobe import run_meta
from lab.studies.fv_training import FV_EVERY, WORD_TASKS, train_tasks
from lab.studies.natural_law.measure import onset_row, probe_records, training_losses

KINDS = ("fv", "prefix_matching")
MEASURES = ("hits@1", "icl_score")
KIND_DRAWS = 20  # random draws behind each cell of the 2 x 2 table


def chosen(checkpoints: list) -> list:
    """Every ``FV_EVERY``-th checkpoint and the last, in training order.

    >>> chosen(list(range(10)))
    [3, 7, 9]
    """
    picked = checkpoints[FV_EVERY - 1 :: FV_EVERY]
    return picked + checkpoints[-1:] if checkpoints and checkpoints[-1] not in picked else picked


def _finite(values) -> list:
    """A nested list with NaN as None (JSON has no NaN)."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    return None if values is None or math.isnan(values) else round(float(values), 5)


def checkpoint_record(model, step: int, tokens: int, tasks: list) -> dict:
    """One checkpoint's heads: prefix matching, FV scores, FV heads and the tasks' accuracy."""
    ps = ihprobe.scan(model, ["prefix_matching"]).head["prefix_matching"]
    fv = ihprobe.fv_scores(model, tasks)
    return {
        "step": step,
        "tokens": tokens,
        "ps": _finite(ps.double().tolist()),
        "fv": _finite(fv.scores.tolist()),
        "fv_heads": [[a, b] for a, b, _ in fv.fv_heads()],
        "fv_heads_significant": [[a, b] for a, b, _ in fv.fv_heads(min_effect=0, relative=0)],
        "tasks": {
            t.name: [round(t.accuracy, 4), round(t.chance, 4), bool(t.above_chance)]
            for t in fv.tasks
        },
    }


def kind_columns(table, error: str = "") -> dict:
    """The 2 x 2 table's columns of the CSV row (``kind_<kind>_<measure>_<field>``)."""
    row = {"kind_error": error}
    for kind in KINDS:
        for measure in MEASURES:
            key = f"kind_{kind}_{measure.replace('@', '')}"
            cell = table.cell(kind, measure) if table is not None else None
            for field in ("change", "load_bearing_index", "load_bearing_lo", "load_bearing_hi"):
                row[f"{key}_{field}"] = float(cell[field]) if cell is not None else math.nan
            row[f"{key}_answer"] = str(cell["answer"]) if cell is not None else ""
    return row


def final_table(model, tasks: list) -> dict:
    """``kind_table`` on the last checkpoint: ranked on the built-ins, judged on the word tasks."""
    rank = [t for t in tasks if t.name not in WORD_TASKS]
    judge = [t for t in tasks if t.name in WORD_TASKS]
    try:
        table = ihprobe.kind_table(model, tasks=rank, held_out=judge, top=1, draws=KIND_DRAWS)
    except ihprobe.IhprobeError as err:
        return kind_columns(None, str(err).splitlines()[0])
    return kind_columns(table)


def measure(run: Path, cell: str, seed: int) -> dict:
    """One finished run's row of the CSV of record."""
    config = (run_meta(run) or {}).get("config", {})
    batch_size, context = int(config["batch_size"]), int(config["context"])
    records = probe_records(run)
    tasks = train_tasks()
    series = []
    model = None
    for point in chosen(ihprobe.checkpoints(run)):
        model = ihprobe.load(point.source, device="auto")
        series.append(checkpoint_record(model, point.step, point.tokens, tasks))
    return {
        "B": batch_size,
        "C": context,
        "steps": int(config["steps"]),
        **onset_row(records, batch_size, context),
        "max_ps": max((r["max_prefix_matching"] for r in records), default=math.nan),
        **training_losses(run),
        **final_table(model, tasks),
        "series": json.dumps(series, separators=(",", ":")),
    }
