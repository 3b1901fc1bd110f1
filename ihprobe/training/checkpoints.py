"""What the trainer writes at a checkpoint: the training state for ``--resume``, the HF checkpoint
directory with its ``ihprobe.json``, and the run's ``run.json``. Each is written whole or not at
all (:mod:`ihprobe.core.files`), so a kill or a full disk never leaves a torn file.

>>> [name for name in STATE_FIELDS if name not in OPTIONAL_STATE_FIELDS]
['step', 'model', 'optimizer', 'rng_cpu', 'loss']
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import transformers

from ihprobe import __version__
from ihprobe.core.files import MARKER, atomic_directory, atomic_write
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.models import quiet_progress
from ihprobe.io.runs import CHECKPOINT_META, RUN_META, RunDir, run_meta
from ihprobe.io.weights import CHECKSUM_FORMAT, checkpoint_checksums
from ihprobe.training.config import TrainConfig

# The fields of a training state file and what each holds.
STATE_FIELDS = {
    "step": "updates done (0-d integer tensor)",
    "model": "the weights (state dict)",
    "optimizer": "AdamW's state dict",
    "rng_cpu": "torch's CPU generator state",
    "loss": "the last logged loss ([] before the first log)",
    "window_start": "the update the open loss window starts at",
    "window_loss": "the loss summed over the open window, all ranks",
    "rng_cuda": "the GPU generator state, when training on a GPU",
    "train_seconds": "wall seconds the run has trained at this state, over every session",
}
# older states lack the window and the seconds
OPTIONAL_STATE_FIELDS = ("window_start", "window_loss", "rng_cuda", "train_seconds")


def write_state(run: RunDir, step: int, state: dict) -> None:
    """``state`` (plain tensors, read back with ``torch.load(weights_only=True)``) as the run's
    only training state: the older one is removed once this one is complete."""
    path = run.state_file(step)
    atomic_write(path, lambda tmp: _torch_save(state, tmp))
    for old in run.state.glob("step-*.pt"):  # only the latest is needed to resume
        if old != path:
            old.unlink()


def _torch_save(state: dict, path: Path) -> None:
    # through a Python file, so a failing write (disk full) surfaces as the OS error it is
    with open(path, "wb") as fh:
        torch.save(state, fh)


def write_checkpoint(run: RunDir, step: int, model, producer, meta: dict) -> None:
    """An HF directory (weights, config, tokenizer) written under a temporary name and renamed
    when complete; its ``ihprobe.json`` is ``meta`` plus the SHA-256 of each file that decides
    its numbers (config, tokenizer, weights), which :func:`ihprobe.load` checks."""
    with atomic_directory(run.checkpoint(step)) as tmp:
        with quiet_progress():
            model.save_pretrained(tmp)
        if producer.tokenizer() is not None:
            producer.save_tokenizer(tmp)
        else:
            id_tokenizer(producer.vocab_size).save_pretrained(str(tmp))
        meta = {**meta, "format": CHECKSUM_FORMAT, "sha256": checkpoint_checksums(tmp)}
        written = [p.name for p in tmp.iterdir() if p.is_file() and p.name != MARKER]
        meta["files"] = sorted([*written, CHECKPOINT_META])  # all RunDir.clear may remove
        atomic_write(tmp / CHECKPOINT_META, json.dumps(meta, indent=2) + "\n")


def checkpoint_meta(
    config: TrainConfig,
    run: RunDir,
    step: int,
    *,
    sizes: dict,
    data: dict,
    loss: float | None,
    world_size: int,
) -> dict:
    """``ihprobe.json`` of checkpoint ``step``: where it sits in training and on what data."""
    return {
        "step": step,
        "tokens": step * config.tokens_per_update,
        "batch_size": config.batch_size,
        "context": config.context,
        "run": run.root.name,
        "model": sizes,
        "data": data,
        "producer_step": step,  # the producer is a pure function of (seed, step)
        "seed": config.seed,
        "loss": loss,  # mean training loss of the last logged updates
        "lr": config.lr,
        "world_size": world_size,
    }


def new_run_meta(
    config: TrainConfig,
    *,
    schedule: list[int],
    sizes: dict,
    hf_config: dict,
    data: dict,
    world_size: int,
) -> dict:
    """``run.json`` of a new run: the config and what it resolved to."""
    total = config.total_steps
    return {
        "config": config.to_json(),
        "steps": total,
        "tokens": total * config.tokens_per_update,
        "tokens_per_update": config.tokens_per_update,
        "checkpoint_steps": schedule,
        "model": sizes,
        "hf_config": hf_config,
        "data": data,
        "world_size": world_size,
        "versions": {
            "ihprobe": __version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    }


def record_device(run: RunDir, device: str) -> None:
    """``run.json``'s ``trained_on``: each device (in words) a session of the run trained on, so
    a result names where it was computed (a run resumed elsewhere lists both)."""
    meta = run_meta(run.root)
    meta["trained_on"] = sorted({*meta.get("trained_on", []), device})
    run.write_json(RUN_META, meta)


def record_seconds(run: RunDir, seconds: float) -> None:
    """``run.json``'s ``train_seconds``: the wall seconds the finished run trained over every
    session (null when a resumed state predates the count)."""
    meta = run_meta(run.root)
    meta["train_seconds"] = round(seconds, 1) if math.isfinite(seconds) else None
    run.write_json(RUN_META, meta)
