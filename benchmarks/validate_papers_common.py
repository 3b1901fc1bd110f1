"""What the papers' validation scripts share: train-or-resume-or-reuse a run, hardware, tables.

A cell's run lives in its own directory. A finished run (``ihprobe.runs.is_finished``) is
reused; a run killed mid-training is resumed from its latest training state
(``resume=True``); a directory without a state (killed before the first one) starts again.
Each run's analysis goes to ``result.json`` beside it, so a rerun skips what is done.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ihprobe.errors import IhprobeError
from ihprobe.runs import RunDir, config_changes, is_finished, run_meta
from ihprobe.train_config import RESUMABLE_CHANGES
from ihprobe.trainer import TrainConfig, train

ROOT = Path(__file__).resolve().parent.parent
RESULT = "result.json"


def hardware() -> str:
    """One line: CPU, cores, torch threads and version."""
    import torch

    cpu = platform.processor() or platform.machine()
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {platform.system()}"
    )


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


def bootstrap_mean(values, *, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean over seeds and its percentile-bootstrap 95% interval (NaN interval below 2 values)."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return (np.nan, np.nan, np.nan)
    if len(x) < 2:
        return (float(x.mean()), np.nan, np.nan)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (resamples, len(x)))].mean(axis=1)
    return float(x.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def interval(mean: float, lo: float, hi: float, digits: int = 3) -> str:
    """``m [lo, hi]``, ``m (one seed)`` or ``pending``."""
    if not np.isfinite(mean):
        return "pending"
    if not np.isfinite(lo):
        return f"{mean:.{digits}g} (one seed)"
    return f"{mean:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


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
