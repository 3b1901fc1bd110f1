"""What the papers' validation scripts share: train-or-resume-or-reuse a run, hardware, tables.

A cell's run lives in its own directory. A finished run (``ihprobe.io.runs.is_finished``) is
reused; a run killed mid-training is resumed from its latest training state
(``resume=True``); a directory without a state (killed before the first one) starts again.
Each run's analysis goes to ``result.json`` beside it, so a rerun skips what is done.
Statistics and verdict rules live in ``verdicts.py``, shared by every validation script.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ihprobe.core.errors import IhprobeError
from ihprobe.io.runs import RunDir, config_changes, is_finished, run_meta
from ihprobe.training.config import RESUMABLE_CHANGES
from ihprobe.training.trainer import TrainConfig, train

ROOT = Path(__file__).resolve().parent.parent
RESULT = "result.json"


def hardware() -> str:
    """One line: CPU, cores and torch version (the runs' threads are in each report's header)."""
    import torch

    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {platform.system()}"


def train_or_reuse(config: TrainConfig) -> tuple[Path, float, str]:
    """(run dir, wall seconds spent now, how: "reused" | "resumed" | "trained").

    A directory holding a run with another config is an error, never silently reused.
    """
    out = Path(config.out)
    started = time.perf_counter()
    changed = config_changes(out, config.to_json(), ignore=(*RESUMABLE_CHANGES, "out"))
    if changed:
        sys.exit(
            f"{out} holds a run with another config ({changed}); pass the same options as "
            "before, or another --out."
        )
    if is_finished(out):
        return out, 0.0, "reused"
    how = "trained"
    if run_meta(out) is not None and RunDir(out).latest_state() is not None:
        config, how = replace(config, resume=True), "resumed"
    elif out.exists():
        shutil.rmtree(out)  # killed before its first training state: nothing to resume
    try:
        train(config)
    except IhprobeError as err:
        sys.exit(f"{out}: {err}")
    return out, time.perf_counter() - started, how


def read_result(run_dir: Path) -> dict | None:
    path = run_dir / RESULT
    return json.loads(path.read_text()) if path.is_file() else None


def status_row(base: dict, result: dict | None) -> dict:
    """A results-table row: ``base`` plus the result and status done, or status pending."""
    return {**base, "status": "done", **result} if result else {**base, "status": "pending"}


def write_result(run_dir: Path, result: dict) -> None:
    tmp = run_dir / (RESULT + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=float))
    tmp.replace(run_dir / RESULT)  # atomic: a kill leaves the old file or the new one


def saved_results(csv: Path, key: tuple[str, ...] = ("cell", "seed")) -> dict[tuple, dict]:
    """The done rows of a results CSV by ``key``: the record of runs whose folders are gone
    (``runs/`` is not committed), so a new seed adds to the table instead of replacing it."""
    if not csv.is_file():
        return {}
    frame = pd.read_csv(csv)
    frame = frame[frame.status == "done"]
    return {tuple(row[k] for k in key): row for row in frame.to_dict("records")}


def results_pair(md: Path, csv: Path, out: str, default_out: Path) -> tuple[Path, Path]:
    """The committed results files for the default run folder; for another ``--out`` (a smoke
    run) the same names inside that folder, so a smoke run never overwrites the committed ones.

    >>> results_pair(Path("R.md"), Path("R.csv"), "/tmp/smoke", "runs/x")
    (PosixPath('/tmp/smoke/R.md'), PosixPath('/tmp/smoke/R.csv'))
    """
    if Path(out).resolve() == Path(default_out).resolve():
        return md, csv
    return Path(out) / md.name, Path(out) / csv.name


@contextmanager
def report_lock(csv: Path):
    """Hold an exclusive lock beside a results CSV while it is read and rewritten, so two
    processes that finish together do not interleave their reports."""
    with open(csv.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def markdown(frame: pd.DataFrame) -> list[str]:
    return [
        "| " + " | ".join(str(c) for c in frame.columns) + " |",
        "|" + " --- |" * len(frame.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)),
    ]


def command_line() -> str:
    return "nice -n 19 .venv/bin/python " + " ".join(
        [os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]
    )


def wall_hours(frame: pd.DataFrame) -> float:
    """Training plus probe seconds of the finished runs, in hours."""
    done = frame[frame.status == "done"]
    return float(done.get("train_s", pd.Series(dtype=float)).fillna(0).sum()
                 + done.get("probe_s", pd.Series(dtype=float)).fillna(0).sum()) / 3600  # fmt: skip


def report_header(title: str, script: str, unit: str, frame: pd.DataFrame) -> list[str]:
    """The first lines of a results file: title, how the runs were launched (``unit``: the
    options of one process), the last command,
    the hardware and the one-core wall time of the finished runs."""
    return [
        f"# {title}", "",
        f"Runs: `nice -n 19 .venv/bin/python benchmarks/{script} {unit}`, two processes at a "
        "time (one per core, `OMP_NUM_THREADS=1`); the tables: the same with `--report`.",
        f"Last command: `{command_line()}`", f"Hardware: {hardware()}",
        f"Wall time of the finished runs: {wall_hours(frame):.2f} h of one core (training and "
        "probes, summed over cells and seeds).", "",
    ]  # fmt: skip
