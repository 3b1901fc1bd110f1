"""Sweeps on Slurm through submitit: each unfinished grid cell is one job running
``ihprobe train`` (under ``torchrun``, one process per GPU, when a run has more than one GPU).

submitit is an optional extra (``pip install ihprobe[cluster]``). Its ``local`` cluster runs the
same jobs as processes of this machine, which is how the tests run without Slurm.

>>> Slurm(partition="gpu", time_min=120, gpus_per_run=4).launcher()[2:5]
['torch.distributed.run', '--standalone', '--nproc-per-node=4']
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ihprobe.core.errors import IhprobeError

log = logging.getLogger(__name__)


class Run(Protocol):
    """What a launcher needs of one run of a sweep (:class:`ihprobe.jobs.sweep.Run` has it)."""

    out: Path

    @property
    def name(self) -> str: ...

    @property
    def log(self) -> Path: ...

    def train_command(self, extra: tuple[str, ...], launcher: Sequence[str]) -> list[str]: ...


INSTALL = "pip install 'ihprobe[cluster]'"


@dataclass(frozen=True)
class Slurm:
    """How each run of a sweep is submitted.

    Attributes:
        partition: Slurm partition (None: the cluster's default).
        time_min: wall-clock limit of each run's job, in minutes.
        gpus_per_run: GPUs of each job; more than one makes the run a ``torchrun`` DDP job.
        cluster: submitit's cluster: ``slurm``, or ``local`` for processes of this machine.
    """

    partition: str | None = None
    time_min: int = 60
    gpus_per_run: int = 1
    cluster: str = "slurm"

    def launcher(self) -> list[str]:
        """The command that starts ``ihprobe`` in each job."""
        if self.gpus_per_run > 1:
            torchrun = ["-m", "torch.distributed.run", "--standalone"]
            return [
                sys.executable,
                *torchrun,
                f"--nproc-per-node={self.gpus_per_run}",
                "-m",
                "ihprobe",
            ]
        return [sys.executable, "-m", "ihprobe"]

    def parameters(self) -> dict:
        """submitit's ``update_parameters`` for each job: one node, one task (torchrun starts
        the per-GPU processes), a CPU per GPU."""
        return {
            "name": "ihprobe-train",
            "timeout_min": self.time_min,
            "nodes": 1,
            "tasks_per_node": 1,
            "gpus_per_node": self.gpus_per_run,
            "cpus_per_task": max(1, self.gpus_per_run),
            "slurm_partition": self.partition,
        }


@dataclass(frozen=True)
class TrainJob:
    """One submitit job: run an ``ihprobe train`` command, its output appended to ``log``.

    It raises when the command fails, so that submitit marks the job failed.
    """

    command: tuple[str, ...]
    log: Path

    def __call__(self) -> None:
        with open(self.log, "a") as out:
            code = subprocess.run(self.command, stdout=out, stderr=subprocess.STDOUT).returncode
        if code:
            raise RuntimeError(f"ihprobe train exited with status {code}; see {self.log}")


def import_submitit():
    """submitit, or an :class:`IhprobeError` saying how to install it."""
    try:
        import submitit  # optional: only sweeps on a cluster need it
    except ImportError:
        raise IhprobeError(f"--launcher slurm needs submitit: {INSTALL}") from None
    return submitit


def check_cluster(slurm: Slurm) -> None:
    """Refuse before any work when submitit or (for ``slurm``) Slurm's commands are missing."""
    import_submitit()
    missing = [c for c in ("sbatch", "srun") if shutil.which(c) is None]
    if slurm.cluster == "slurm" and missing:
        raise IhprobeError(
            f"--launcher slurm: {missing[0]} is not on PATH; run the sweep on a Slurm login "
            "node, or use --launcher local."
        )


def submit_all(
    runs: list[Run], extra: tuple[str, ...], slurm: Slurm, folder: Path
) -> dict[str, str]:
    """Submit one job per run (a Slurm job array), wait for them all, and return why each
    failed one failed (run name -> reason). submitit's own logs go to ``folder``."""
    submitit = import_submitit()
    executor = submitit.AutoExecutor(folder=folder, cluster=slurm.cluster)
    executor.update_parameters(**slurm.parameters())
    with executor.batch():
        jobs = [executor.submit(_job(run, extra, slurm)) for run in runs]
    for run, job in zip(runs, jobs, strict=True):
        log.info("submitted %s as job %s", run.name, job.job_id)
    failed = {}
    for run, job in zip(runs, jobs, strict=True):
        try:
            error = job.exception()
        except submitit.core.utils.UncompletedJobError as err:  # cancelled, timed out, lost
            error = err
        if error is not None:
            failed[run.name] = _why(job)
            log.warning("%s failed (%s); see %s", run.name, failed[run.name], run.log)
    return failed


def _why(job) -> str:
    """``job 123 TIMEOUT`` where Slurm tells why, else that ``ihprobe train`` itself failed."""
    state = job.state
    ended = state in ("FINISHED", "COMPLETED", "UNKNOWN")
    return f"job {job.job_id}: ihprobe train failed" if ended else f"job {job.job_id} {state}"


def _job(run: Run, extra: tuple[str, ...], slurm: Slurm) -> TrainJob:
    run.out.parent.mkdir(parents=True, exist_ok=True)
    return TrainJob(tuple(run.train_command(extra, slurm.launcher())), run.log)
