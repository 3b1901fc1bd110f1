"""What the papers' validation scripts share: train-or-resume-or-reuse a run, hardware, tables.

A cell's run lives in its own directory. A finished run (``ihprobe.io.runs.is_finished``) is
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


def interval(mean: float, lo: float, hi: float, digits: int = 3, spec: str | None = None) -> str:
    """``m [lo, hi]``, ``m (one seed)`` or ``pending``; ``spec`` a format such as ``",.0f"``
    (default: ``digits`` significant digits).

    >>> interval(11800.4, 10200, 13200, spec=",.0f"), interval(0.5, np.nan, np.nan)
    ('11,800 [10,200, 13,200]', '0.5 (one seed)')
    """
    spec = spec or f".{digits}g"
    if not np.isfinite(mean):
        return "pending"
    if not np.isfinite(lo):
        return f"{mean:{spec}} (one seed)"
    return f"{mean:{spec}} [{lo:{spec}}, {hi:{spec}}]"


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


def verdict_value(ci: tuple[float, float], paper: float, *, widest: float) -> tuple[str, str]:
    """(verdict, why) for a measured interval against a paper's point value.

    "agrees" when the interval holds the paper's value, "disagrees" when it excludes it, and
    "inconclusive at this scale" when it is missing or wider than ``widest`` (it would agree
    with almost anything).

    >>> verdict_value((0.2, 0.5), 0.37, widest=1)[0], verdict_value((0.6, 0.9), 0.37, widest=1)[0]
    ('agrees', 'disagrees')
    >>> verdict_value((-2.0, 3.0), 0.37, widest=1)[0]
    'inconclusive at this scale'
    """
    lo, hi = ci
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo > widest:
        return "inconclusive at this scale", f"the 95% interval [{lo:.2g}, {hi:.2g}] is too wide"
    if lo <= paper <= hi:
        return "agrees", f"the 95% interval [{lo:.2g}, {hi:.2g}] holds {paper:g}"
    side = "above" if lo > paper else "below"
    return "disagrees", f"the 95% interval [{lo:.2g}, {hi:.2g}] lies {side} {paper:g}"


def verdict_order(
    higher: tuple[float, float], lower: tuple[float, float], *, expected: bool = True
) -> tuple[str, str]:
    """(verdict, why) for a paper's claim that one quantity exceeds another (``expected``) or
    does not (``expected=False``), from their 95% intervals: separated intervals decide, overlapping
    ones are "inconclusive at this scale".

    >>> verdict_order((0.8, 0.9), (0.1, 0.2))[0], verdict_order((0.1, 0.2), (0.8, 0.9))[0]
    ('agrees', 'disagrees')
    >>> verdict_order((0.1, 0.5), (0.3, 0.9))[0]
    'inconclusive at this scale'
    """
    (a_lo, a_hi), (b_lo, b_hi) = higher, lower
    if not all(np.isfinite([a_lo, a_hi, b_lo, b_hi])):
        return "inconclusive at this scale", "an interval is missing (fewer than 2 seeds)"
    if a_lo > b_hi:
        found = True
    elif a_hi < b_lo:
        found = False
    else:
        return "inconclusive at this scale", "the 95% intervals overlap"
    how = "above" if found else "below"
    why = f"[{a_lo:.2g}, {a_hi:.2g}] lies {how} [{b_lo:.2g}, {b_hi:.2g}]"
    return ("agrees" if found == expected else "disagrees"), why


def log_ratio(a, b, *, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """log10(mean a / mean b) and its bootstrap 95% interval, seeds resampled within each
    group (NaN interval when either has fewer than 2 values)."""
    x, y = (np.asarray([v for v in g if v is not None and np.isfinite(v)], float) for g in (a, b))
    if len(x) == 0 or len(y) == 0:
        return (np.nan, np.nan, np.nan)
    point = float(np.log10(x.mean() / y.mean()))
    if len(x) < 2 or len(y) < 2:
        return (point, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    mx = x[rng.integers(0, len(x), (resamples, len(x)))].mean(axis=1)
    my = y[rng.integers(0, len(y), (resamples, len(y)))].mean(axis=1)
    lo, hi = np.percentile(np.log10(mx / my), [2.5, 97.5])
    return point, float(lo), float(hi)


def verdict_same(ci: tuple[float, float], *, factor: float = 1.5) -> tuple[str, str]:
    """(verdict, why) for a claim that two quantities are the same, from the 95% interval of
    log10 of their ratio: "agrees" inside a factor ``factor`` either way, "disagrees" when the
    interval excludes 1, otherwise "inconclusive at this scale".

    >>> verdict_same((-0.05, 0.1))[0], verdict_same((0.3, 0.5))[0], verdict_same((-0.1, 0.4))[0]
    ('agrees', 'disagrees', 'inconclusive at this scale')
    """
    lo, hi = ci
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive at this scale", "an interval is missing (fewer than 2 seeds)"
    span = f"ratio 95% interval [{10**lo:.2f}, {10**hi:.2f}]"
    if -np.log10(factor) <= lo and hi <= np.log10(factor):
        return "agrees", f"{span}, within {factor}x either way"
    if lo > 0 or hi < 0:
        return "disagrees", f"{span} excludes 1"
    return "inconclusive at this scale", f"{span} holds 1 but is wider than {factor}x"


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
