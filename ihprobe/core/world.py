"""Where training and sharded scans run: this process's rank in a ``torchrun`` job (or a job
of one) and its device.

>>> with join_world("cpu") as world:
...     world.main, world.size
(True, 1)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ihprobe.core.errors import IhprobeError


@dataclass(frozen=True)
class World:
    """This process's place in a (possibly single-process) DDP job."""

    rank: int = 0
    size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.size > 1:
            torch.distributed.barrier()

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        if self.size > 1:
            value = value.clone()
            torch.distributed.all_reduce(value)
            value /= self.size
        return value


def world_size() -> int:
    """Processes in the torchrun job (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``device`` as a torch device (``"auto"``: cuda when available); checked to exist."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise IhprobeError(
            f"device={device!r} is not a device; use auto, cpu, cuda or cuda:N."
        ) from err
    if dev.type not in ("cpu", "cuda"):
        raise IhprobeError(
            f"device={device!r}: ihprobe runs on cpu or cuda; use auto, cpu or cuda."
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise IhprobeError(f"device={device!r} but no CUDA device is available; use cpu.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise IhprobeError(
                f"device={device!r}: there are {torch.cuda.device_count()} CUDA devices."
            )
        if dev.index is None and world_size() > 1:
            dev = torch.device("cuda", local_rank)
    return dev


def is_main_process() -> bool:
    """Whether this process is rank 0 (the one that writes files), before the job is joined."""
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def join_world(device: str) -> Iterator[World]:
    """Join the torchrun job when WORLD_SIZE > 1 (gloo on CPU, nccl on GPU); leave it at exit.

    On a normal exit every rank waits for the others before the process group is destroyed
    (gloo aborts a rank whose peer leaves mid-collective); after an error it is destroyed at once.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    if world_size() == 1:
        yield World(device=dev)
        return
    owned = not dist.is_initialized()
    if owned:
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    finished = False
    try:
        yield World(dist.get_rank(), dist.get_world_size(), dev)
        finished = True
    finally:
        if owned:
            if finished:  # no rank tears gloo down while another still talks to it
                dist.barrier()
                # gloo's worker thread retires the barrier's work after wait() returns and needs
                # the GIL for it; destroying the group (which joins that thread) while this
                # thread holds the GIL would deadlock, so let it finish first.
                time.sleep(0.05)
            dist.destroy_process_group()
