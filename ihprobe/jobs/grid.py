"""The one grid runner: cells x seeds, each a run folder trained, resumed or reused, and the CSV
of record that keeps every finished run's numbers.

A grid declares its cells as data: a base :class:`~ihprobe.training.config.TrainConfig` and, per
cell name, the fields that differ from it. Cell ``c``, seed ``s`` lives in ``root/c/seed{s}``.
:meth:`Grid.run` (or :func:`train_or_reuse` for a config built by hand) reuses a finished run
folder whose ``run.json`` holds the same config (one trained by ``ihprobe.train`` before the grid
existed included), resumes one killed mid-training from its latest training state, and trains
the rest. A folder holding a run with another config is an error, never silently reused.

Each run's analysis goes to ``result.json`` beside its checkpoints (:func:`write_result`), and a
study gathers one row per cell and seed (:func:`status_row`) into its CSV of record, merged with
the rows of runs whose folders are gone (:func:`saved_results`: ``runs/`` is not committed).

>>> from ihprobe.training.config import TrainConfig
>>> cells = {"B4": {"batch_size": 4}, "B16": {"batch_size": 16}}
>>> grid = Grid("runs/g", TrainConfig(steps=10), cells)
>>> [(c.batch_size, c.seed, c.out) for c in (grid.config("B4", 0), grid.config("B16", 2))]
[(4, 0, 'runs/g/B4/seed0'), (16, 2, 'runs/g/B16/seed2')]
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import time
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_write
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.io.runs import RunDir, config_changes, is_finished, run_meta
from ihprobe.training.config import RESUMABLE_CHANGES, TrainConfig

RESULT = "result.json"  # a run's analysis, beside its checkpoints


def train(config: TrainConfig) -> Path:
    """``ihprobe.training.trainer.train``, imported on the first run: the rest of this module
    (``markdown``, the device job's tables) loads without the model libraries.

    Example: ``train(TrainConfig(steps=10, out="runs/x"))`` returns the run folder.
    """
    from ihprobe.training.trainer import train as run

    return run(config)


@dataclass(frozen=True)
class Grid:
    """Cells x seeds of one study: run folders under ``root``, each cell's config the ``base``
    with the cell's fields (``cells[name]``, a mapping of TrainConfig fields) and the seed."""

    root: str | os.PathLike
    base: TrainConfig
    cells: Mapping[str, Mapping[str, object]]
    seeds: tuple[int, ...] = field(default=(0, 1, 2, 3, 4))

    def folder(self, cell: str, seed: int) -> Path:
        return Path(self.root) / cell / f"seed{seed}"

    def config(self, cell: str, seed: int) -> TrainConfig:
        """The TrainConfig of one cell and seed (an unknown cell: one line naming the cells)."""
        if cell not in self.cells:
            raise IhprobeError(f"unknown cell {cell!r}; choose one of {', '.join(self.cells)}.")
        fields = {**self.cells[cell], "seed": seed, "out": str(self.folder(cell, seed))}
        return replace(self.base, **fields)

    def run(self, cell: str, seed: int) -> tuple[Path, float, str]:
        """Train, resume or reuse one cell and seed: see :func:`train_or_reuse`."""
        return train_or_reuse(self.config(cell, seed))

    def pairs(self) -> list[tuple[str, int]]:
        """Every (cell, seed), cells in their declared order."""
        return [(cell, seed) for cell in self.cells for seed in self.seeds]


def train_or_reuse(
    config: TrainConfig, *, threads: int | None = DEFAULT_THREADS
) -> tuple[Path, float, str]:
    """(run folder, wall seconds spent now, how: ``"reused"`` | ``"resumed"`` | ``"trained"``).

    A finished run folder whose config matches (up to ``out`` and the changes a resume may
    make) is reused; one with a training state is resumed; one killed before its first state
    starts again. A folder holding another config raises :class:`IhprobeError`. It trains
    with ``threads`` torch threads, one by default as ``ihprobe train`` does: two grid runs
    side by side on 2 cores, each at torch's default of 2 threads, trained 3.4x (d_model 256)
    to 9x (d_model 64, B = 1) slower than at one thread each (``ihprobe.core.threads``).
    """
    out = Path(config.out)
    started = time.perf_counter()
    changed = other_config(out, config)
    if changed:
        raise IhprobeError(
            f"{out} holds a run with another config ({changed}); pass the same options as "
            "before, or another --out."
        )
    if is_finished(out):
        return out, 0.0, "reused"
    how = "trained"
    if run_meta(out) is not None and RunDir(out).latest_state() is not None:
        config, how = replace(config, resume=True), "resumed"
    elif out.exists():  # killed before its first training state: nothing to resume
        RunDir(out).clear()  # what the trainer wrote, nothing else
    try:
        with torch_threads(threads):
            train(config)
    except IhprobeError as err:
        raise IhprobeError(f"{out}: {err}") from err
    return out, time.perf_counter() - started, how


def other_config(
    out: str | os.PathLike, config: TrainConfig, ignore: Iterable[str] = ()
) -> dict[str, tuple[object, object]]:
    """The fields the run in folder ``out`` was trained with that differ from ``config``
    (``{field: (saved, wanted)}``), up to ``out``, the changes a resume may make and
    ``ignore``; empty when it is that config's run, or there is none. The one test of "is this
    the same run" before a run folder is reused.

    >>> other_config("runs/never-made", TrainConfig())
    {}
    """
    return config_changes(out, config.to_json(), ignore=(*RESUMABLE_CHANGES, "out", *ignore))


def unfinished(folders: Iterable[str | os.PathLike]) -> list[Path]:
    """The run folders still to train: those the run folder does not call finished.

    >>> unfinished(["runs/never-made"])
    [PosixPath('runs/never-made')]
    """
    return [Path(f) for f in folders if not is_finished(f)]


# the CSV of record


def read_result(run_dir: Path) -> dict | None:
    """A run's ``result.json``; None before its analysis ran."""
    path = Path(run_dir) / RESULT
    return json.loads(path.read_text()) if path.is_file() else None


def write_result(run_dir: Path, result: dict) -> None:
    """Write a run's ``result.json`` atomically (a kill leaves the old file or the new one)."""
    atomic_write(Path(run_dir) / RESULT, json.dumps(result, indent=1, default=float))


def status_row(base: dict, result: dict | None) -> dict:
    """A results-table row: ``base`` plus the result and status done, or status pending.

    >>> status_row({"cell": "a", "seed": 0}, None)
    {'cell': 'a', 'seed': 0, 'status': 'pending'}
    """
    return {**base, "status": "done", **result} if result else {**base, "status": "pending"}


def saved_results(csv: Path, key: tuple[str, ...] = ("cell", "seed")) -> dict[tuple, dict]:
    """The done rows of a results CSV by ``key``: the record of runs whose folders are gone
    (``runs/`` is not committed), so a new seed adds to the table instead of replacing it."""
    if not Path(csv).is_file():
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


def write_record(csv: Path, frame: pd.DataFrame, md: Path, text: str) -> None:
    """Write the CSV of record and the results file drawn from it, each atomically: a process
    killed while it reports (a queue's deadline) leaves whole files, old or new."""
    atomic_write(Path(csv), lambda path: frame.to_csv(path, index=False))
    atomic_write(Path(md), text)


@contextmanager
def report_lock(csv: Path):
    """Hold an exclusive lock beside a results CSV while it is read and rewritten, so two
    processes that finish together do not interleave their reports."""
    with open(Path(csv).with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# the report's header


def hardware() -> str:
    """One line: CPU, cores and torch version (the runs' threads are in each report's header)."""
    import torch

    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {platform.system()}"


def wall_hours(frame: pd.DataFrame) -> float:
    """Training plus probe seconds of the finished runs, in hours.

    >>> wall_hours(pd.DataFrame({"status": ["done", "pending"], "train_s": [5400.0, 9.0]}))
    1.5
    """
    done = frame[frame.status == "done"]
    empty = pd.Series(dtype=float)
    seconds = sum(done.get(key, empty).fillna(0).sum() for key in ("train_s", "probe_s"))
    return float(seconds) / 3600


def markdown(frame: pd.DataFrame) -> list[str]:
    """A frame as the lines of a markdown table, values as ``str`` prints them.

    >>> markdown(pd.DataFrame({"a": [1], "b": ["x"]}))
    ['| a | b |', '| --- | --- |', '| 1 | x |']
    """
    return [
        "| " + " | ".join(str(c) for c in frame.columns) + " |",
        "|" + " --- |" * len(frame.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)),
    ]


PROVENANCE = ("Runs: ", "Last command: ", "Hardware: ")  # the header lines that say who ran


@dataclass(frozen=True)
class Provenance:
    """How a study's runs were launched (``runs``: one process's command), the last command
    that changed its record, and the hardware: the lines a report's header starts with."""

    runs: str
    command: str
    hardware: str

    def lines(self) -> list[str]:
        return [
            f"Runs: `{self.runs}`, two processes at a time (one per core, `OMP_NUM_THREADS=1`); "
            "the tables: the same with `--report`.",
            f"Last command: `{self.command}`",
            f"Hardware: {self.hardware}",
        ]


def recorded_provenance(md: Path) -> list[str] | None:
    """The provenance lines a results file records (re-rendering its tables changes no run, so
    it keeps them); None for a file without them."""
    if not Path(md).is_file():
        return None
    lines = Path(md).read_text().splitlines()
    found = [next((x for x in lines if x.startswith(p)), None) for p in PROVENANCE]
    return None if None in found else found


def report_header(title: str, provenance: Provenance | list[str], frame: pd.DataFrame) -> list[str]:
    """The first lines of a results file: title, provenance (a :class:`Provenance` or the lines
    :func:`recorded_provenance` read back) and the one-core wall time of the finished runs."""
    lines = provenance.lines() if isinstance(provenance, Provenance) else list(provenance)
    wall = (
        f"Wall time of the finished runs: {wall_hours(frame):.2f} h of one core (training and "
        "probes, summed over cells and seeds)."
    )
    return [f"# {title}", "", *lines, wall, ""]
