"""Sweeps: train a grid of runs, find each run's emergence point, fit the law, map the frontier.

A grid axis is a :class:`~ihprobe.training.trainer.TrainConfig` field (``batch_size``, ``context``,
``d_model``...) or a producer option (``repetition``, ``reliability``...). Every run is an
independent ``python -m ihprobe train`` process writing its own run directory: local processes,
or Slurm jobs through submitit (:mod:`ihprobe.jobs.cluster`). A finished run is never trained again,
an interrupted one is resumed (the rule of the grid runner, :mod:`ihprobe.jobs.grid`, which runs a
study's cells x seeds in this process).

>>> [run.name for run in plan(["batch_size=4,8", "context=32"], out="runs/law")]
['batch_size=4_context=32', 'batch_size=8_context=32']
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_write, check_writable_dir
from ihprobe.dynamics.changepoint import run_emergence
from ihprobe.dynamics.law import fit_law, law_point
from ihprobe.figures.emergence import frontier_figure, law_figure
from ihprobe.figures.report import Section, write_report
from ihprobe.io.runs import data_means, is_finished
from ihprobe.jobs import grid
from ihprobe.jobs.cluster import Slurm, check_cluster, submit_all
from ihprobe.training.config import TrainConfig

log = logging.getLogger(__name__)

# producer options whose realised value each step logs (metrics.jsonl "data"); the frontier
# map uses the realised values, not the requested ones (docs/science.md)
REALISED = ("repetition", "reliability")
# TrainConfig fields a grid may not set: the sweep owns where runs go and how they resume
NOT_AXES = ("out", "resume", "progress")
LOCAL = (sys.executable, "-m", "ihprobe")  # how a run starts on this machine


@dataclass(frozen=True)
class Run:
    """One point of the grid: its settings and its run directory."""

    settings: tuple[tuple[str, object], ...]
    out: Path

    @property
    def name(self) -> str:
        return self.out.name

    @property
    def log(self) -> Path:
        """The output of its ``ihprobe train``, beside the run directory."""
        return self.out.parent / f"{self.name}.log"

    def train_command(
        self, extra: tuple[str, ...] = (), launcher: Sequence[str] = LOCAL
    ) -> list[str]:
        """The ``ihprobe train`` command line of this run (``--resume`` once it has started);
        ``launcher`` starts ``ihprobe`` (e.g. under torchrun)."""
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        cmd = [*launcher, "train", "--out", str(self.out)]
        for key, value in self.settings:
            if key in fields:
                cmd += [f"--{key.replace('_', '-')}", str(value)]
            else:
                cmd += ["--option", f"{key}={json.dumps(value)}"]
        resume = ["--resume"] if self.out.exists() else []
        return [*cmd, *extra, *resume, "--no-progress"]


def parse_axis(text: str) -> tuple[str, list]:
    """``"batch_size=4,8,16"`` -> ``("batch_size", [4, 8, 16])`` (values read as JSON)."""
    key, sep, values = text.partition("=")
    if not sep or not key or not values:
        raise IhprobeError(f"grid axis {text!r} is not KEY=V1,V2,..., e.g. batch_size=4,8,16.")
    parsed = []
    for part in values.split(","):
        try:
            parsed.append(json.loads(part))
        except json.JSONDecodeError:
            parsed.append(part)
    key = key.strip().replace("-", "_")
    if not key.isidentifier():
        raise IhprobeError(
            f"grid axis {key!r} is not a TrainConfig field or producer option name "
            "(letters, digits and _), e.g. batch_size=4,8,16."
        )
    if key in NOT_AXES:
        raise IhprobeError(
            f"grid axis {key!r} cannot vary: the sweep writes each run under --out/runs; "
            "pass it to the sweep itself instead."
        )
    bad = [
        v for v in parsed if isinstance(v, str) and ("/" in v or "\\" in v or v in ("", ".", ".."))
    ]
    if bad:
        raise IhprobeError(f"grid axis {key}: value {bad[0]!r} cannot be part of a run name.")
    return key, parsed


def plan(axes: list[str], out: str | os.PathLike) -> list[Run]:
    """Every combination of the axes, each with its run directory under ``out/runs``."""
    if not axes:
        raise IhprobeError("a sweep needs at least one --grid KEY=V1,V2,... axis.")
    parsed = [parse_axis(a) for a in axes]
    runs = []
    for combo in itertools.product(*(values for _, values in parsed)):
        settings = tuple((key, value) for (key, _), value in zip(parsed, combo, strict=True))
        name = "_".join(f"{k}={v}" for k, v in settings)
        runs.append(Run(settings, Path(out) / "runs" / name))
    return runs


def train_all(
    runs: list[Run], extra: tuple[str, ...] = (), jobs: int = 1, per_device: int | None = None
) -> dict[str, int]:
    """Train the runs that are not finished, ``jobs`` processes at a time, or with
    ``per_device`` K processes sharing each device of this machine (:func:`device_slots`:
    every GPU, else the CPU), each told its device with ``--device``.

    Returns the exit status per trained run name (0 = success); logs go to ``RUN.log``
    beside each run directory.
    """
    if jobs < 1:
        raise IhprobeError(f"jobs={jobs}: train at least 1 run at a time.")
    slots: list[str | None] = device_slots(per_device) if per_device else [None] * jobs
    env = _env(len(slots)) if per_device else None
    if per_device and "--device" in extra:
        raise IhprobeError("--per-device places each run on a device; drop --device.")
    status: dict[str, int] = {}
    running: list[tuple[Run, subprocess.Popen, str | None]] = []
    queue = unfinished(runs)
    while queue or running:
        while queue and slots:
            run, slot = queue.pop(0), slots.pop(0)
            run.out.parent.mkdir(parents=True, exist_ok=True)
            with open(run.log, "a") as logfile:
                cmd = run.train_command((*extra, *(("--device", slot) if slot else ())))
                log.info("training %s: %s", run.name, " ".join(cmd))
                proc = subprocess.Popen(cmd, stdout=logfile, stderr=logfile, env=env)
                running.append((run, proc, slot))
        run, proc, slot = running.pop(0)  # K alike runs end about in the order they began
        status[run.name] = proc.wait()
        slots.append(slot)
        if status[run.name]:
            log.warning("%s failed (exit %d); see its .log", run.name, status[run.name])
    return status


def device_slots(per_device: int) -> list[str]:
    """``per_device`` places on each device of this machine: every GPU, else the CPU.

    >>> len(device_slots(2)) == 2 * max(1, torch.cuda.device_count())
    True
    """
    if per_device < 1:
        raise IhprobeError(f"per_device={per_device}: run at least 1 process per device.")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = [f"cuda:{i}" for i in range(count)] or ["cpu"]
    return [device for _ in range(per_device) for device in devices]


def _env(processes: int) -> dict[str, str] | None:
    """Processes running at once split the CPU's cores (unless the caller set OMP_NUM_THREADS):
    the producers draw on the CPU even when the models train on GPUs."""
    if "OMP_NUM_THREADS" in os.environ:
        return None
    return {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // processes))}


def unfinished(runs: list[Run]) -> list[Run]:
    """The runs still to train (the run folder says which are finished)."""
    left = set(grid.unfinished(run.out for run in runs))  # the grid runner's rule
    todo = [r for r in runs if r.out in left]
    for run in runs:
        if run not in todo:
            log.info("%s is finished; not training it again", run.name)
    return todo


def summarize(runs: list[Run], **point_kwargs) -> pd.DataFrame:
    """One row per finished run: its grid settings, realised data properties, B, C and
    emergence point (see :func:`ihprobe.dynamics.changepoint.run_emergence` for
    ``point_kwargs``)."""
    rows = []
    for run in runs:
        if not is_finished(run.out):
            log.warning("%s is not finished; left out of the summary", run.name)
            continue
        point = run_emergence(run.out, **point_kwargs)
        bound = law_point(point) or {"updates": None, "censored": None}
        rows.append(
            {
                "run": run.name,
                **dict(run.settings),
                **{f"realised_{k}": v for k, v in data_means(run.out, REALISED).items()},
                **{k: v for k, v in point.to_dict().items() if k not in dict(run.settings)},
                "at_edge": point.at_edge,
                "law_updates": bound["updates"],  # the point, or the bound of a censored run
                "censored": bound["censored"],
            }
        )
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, out: str | os.PathLike) -> dict[str, Path]:
    """Write ``sweep.csv``, the law fit (``law.json``, when B and C vary) and ``sweep.html``
    with the law figure and the frontier map (when repetition and reliability vary)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {"table": out / "sweep.csv"}
    atomic_write(written["table"], lambda tmp: table.to_csv(tmp, index=False))
    sections = [Section("Runs", [table.drop(columns=["curve"], errors="ignore")])]
    formed = _law_points(table)
    placed = len(formed) and not formed["censored"].all()
    if placed and formed["batch_size"].nunique() > 1 and formed["context"].nunique() > 1:
        fit = fit_law(formed)
        written["law"] = out / "law.json"
        atomic_write(written["law"], json.dumps(fit.to_dict(), indent=2))
        sections.append(
            Section(
                "The law",
                [
                    f"U = {fit.T:,.0f} / (B^{fit.b:.3f} C^{fit.c:.3f}), r = {fit.r:.3f} "
                    f"over {len(formed)} runs, {fit.censored} of them censored (kept as "
                    "lower bounds by a Tobit fit) ([A]: T = 750,000, b = 0.37, c = 0.62).",
                    law_figure(fit, reference="fitted"),
                ],
            )
        )
    axes = [c for c in ("repetition", "reliability") if c in table and table[c].nunique() > 1]
    if len(axes) == 2:
        x, y = (f"realised_{a}" if f"realised_{a}" in table else a for a in axes)
        sections.append(Section("Frontier", [frontier_figure(table, x=x, y=y)]))
    written["report"] = write_report(out / "sweep.html", "ihprobe sweep", sections)
    return written


def _law_points(table: pd.DataFrame) -> pd.DataFrame:
    """The rows ``fit_law`` reads: every run with a point or a bound (a censored run kept as a
    lower bound); a table from before ``law_updates`` existed: the runs with a transition."""
    if not len(table):
        return pd.DataFrame(columns=["batch_size", "context", "updates", "censored"])
    if "law_updates" not in table:
        formed = table[table["transition"].astype(bool)]
        return formed[["batch_size", "context", "updates"]].assign(censored=False)
    rows = table.dropna(subset=["law_updates"])
    return pd.DataFrame(
        {
            "batch_size": rows.batch_size,
            "context": rows.context,
            "updates": rows.law_updates,
            "censored": rows.censored.astype(bool),
        }
    )


def run_sweep(
    axes: list[str],
    out: str | os.PathLike,
    *,
    train_args: tuple[str, ...] = (),
    jobs: int = 1,
    per_device: int | None = None,
    train: bool = True,
    slurm: Slurm | None = None,
    **point_kwargs,
) -> tuple[dict[str, Path], dict[str, str]]:
    """Plan the grid, train its unfinished runs, summarise and report them.

    ``slurm``: submit each unfinished run as a job through submitit instead of training
    ``jobs`` local processes at a time; ``per_device``: K local processes on each device.

    Returns the files written (:func:`report`) and why each run that failed failed.

    Example:
        >>> written, failed = run_sweep(["batch_size=4,8"], "runs/law")    # doctest: +SKIP
        >>> written, failed = run_sweep(["batch_size=4,8"], "runs/law",    # doctest: +SKIP
        ...     slurm=Slurm(partition="gpu", time_min=240, gpus_per_run=4))
    """
    check_writable_dir(out)
    runs = plan(axes, out)
    if slurm is not None:
        check_cluster(slurm)
    if not train:
        failed = {}
    elif slurm is not None:
        failed = submit_all(unfinished(runs), train_args, slurm, Path(out) / "slurm")
    else:
        status = train_all(runs, train_args, jobs, per_device)
        failed = {name: f"exit {code}" for name, code in status.items() if code}
    return report(summarize(runs, **point_kwargs), out), failed
