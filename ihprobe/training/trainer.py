"""The minimal trainer: a decoder-only HF model from scratch on any producer, checkpoints on a
token schedule, exact resume, live probes, and DDP under ``torchrun``.

>>> run = train(TrainConfig(out="runs/demo", producer="iid", steps=200))   # doctest: +SKIP
>>> [c.tokens for c in ihprobe.checkpoints(run)][:3]                        # doctest: +SKIP
[0, 2048, 4096]

The loop is :func:`_train` and one update is :func:`_update`; everything else lives beside
them: the checked config and producer (:mod:`~ihprobe.training.inputs`), the model and its
optimiser (:mod:`~ihprobe.training.learner`), starting or resuming a session and saving
(:mod:`~ihprobe.training.session`, :mod:`~ihprobe.training.resume`,
:mod:`~ihprobe.training.checkpoints`), the metrics log (:mod:`~ihprobe.training.metrics_log`),
the live probes (:mod:`~ihprobe.training.live`) and the progress bar
(:mod:`~ihprobe.training.display`). The run directory is described in :mod:`ihprobe.io.runs`,
the config in :mod:`ihprobe.training.config`, the processes in :mod:`ihprobe.core.world`.
Under ``torchrun --nproc_per_node N -m ihprobe train ...`` each rank takes its rows of the same
global batch ``producer.sample(step)``, so ``batch_size`` stays the sequences per update.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from ihprobe.core.files import check_writable_dir
from ihprobe.core.world import World, is_main_process, join_world, world_size
from ihprobe.io.architectures import build_model, causal_lm_loss
from ihprobe.io.runs import RunDir
from ihprobe.training import checkpoints
from ihprobe.training.config import (
    DEFAULT_STEPS,
    TrainConfig,
    check_config,
    check_training_size,
    load_config,
)
from ihprobe.training.display import Display
from ihprobe.training.inputs import as_config, make_run_producer
from ihprobe.training.learner import Learner, make_learner
from ihprobe.training.live import ProbeHook, make_live_probes
from ihprobe.training.metrics_log import log_metrics
from ihprobe.training.precision import autocast, matmul_precision
from ihprobe.training.resume import Plan, check_run_folder, plan_run
from ihprobe.training.schedule import learning_rate
from ihprobe.training.session import Saver, start_session

__all__ = ["DEFAULT_STEPS", "TrainConfig", "build_model", "causal_lm_loss", "load_config", "train"]


def train(config: TrainConfig, *, on_probe: ProbeHook | None = None) -> Path:
    """Train a model from scratch as ``config`` says and return the run directory.

    Writes step-0 and scheduled checkpoints (standard HF directories that
    ``AutoModelForCausalLM.from_pretrained`` and :func:`ihprobe.load` open), ``run.json`` and
    ``metrics.jsonl``; with ``live_probes`` also ``probes.jsonl``. With ``resume`` it continues
    the run in ``config.out`` from its latest training state and ends with the same weights as
    an uninterrupted run; a finished run returns at once, unless ``config`` gives it a larger
    budget: a constant-rate run is then extended (recorded in ``run.json``). ``on_probe`` is
    called with each live-probe record as it is written (rank 0), e.g. to update a forecast.

    While it trains, the process holds the run directory (:meth:`ihprobe.io.runs.RunDir.lock`): a
    second ``train`` on the same ``out`` fails at once instead of interleaving with it.

    Raises:
        IhprobeError: a bad config (before training starts), an existing run without
            ``resume``, a run directory another process holds, a damaged training state, a
            full disk, or a loss that became NaN/inf (the checkpoints written so far stay).

    Example:
        >>> run = train(TrainConfig(out="runs/x", producer="iid", steps=50))  # doctest: +SKIP
        >>> run = train({"out": "runs/x", "producer": "iid", "steps": 50})  # doctest: +SKIP
    """
    config = as_config(config)
    check_config(config, world_size())
    check_run_folder(config)  # a new folder or a run, never a user's folder
    check_training_size(config)  # before any tensor: refused past memory or disk, announced
    producer = make_run_producer(config)  # its options checked, its tables estimated
    run = RunDir(config.out)
    check_writable_dir(config.out, "out")
    with run.lock() if is_main_process() else contextlib.nullcontext():
        plan = plan_run(run, config)
        if plan.first_total != config.total_steps:  # extended: the data keeps its first plan
            producer = make_run_producer(config, plan.first_total)
        with join_world(config.device) as world:
            with matmul_precision(config.precision, world.device):
                return _train(config, plan, producer, run, world, on_probe)


def _train(config, plan: Plan, producer, run: RunDir, world: World, on_probe) -> Path:
    """The loop: save where the schedule says, update, log; rank 0 writes every file."""
    learner = make_learner(config, producer, world)
    start = start_session(config, plan, producer, run, world, learner)
    if start == plan.total and run.checkpoint(plan.total).is_dir():
        return run.root
    display = Display(total=plan.total, start=start, enabled=config.progress and world.main)
    live = make_live_probes(config, run, world, display, on_probe)
    save = Saver(config, producer, run, world, learner, live)
    saves = set(plan.schedule)
    for step in range(start, plan.total):
        if step in saves:
            learner.tally.pause(save(step))
        elif config.state_every and step > start and step % config.state_every == 0:
            learner.tally.pause(save(step, checkpoint=False))
        lr = learning_rate(
            step,
            lr=config.lr,
            total=plan.first_total,
            warmup=config.warmup,
            schedule=config.schedule,
        )
        norm, info = _update(config, producer, world, learner, step, lr)
        display.advance()  # before the log line, which counts this update
        if (step + 1) % config.log_every == 0 or step + 1 == plan.total:
            display.logged(*log_metrics(config, run, world, learner, step + 1, lr, norm, info))
    save(plan.total)
    display.close()
    if world.main:
        checkpoints.record_seconds(run, learner.tally.seconds())
    return run.root


def _update(config, producer, world: World, learner: Learner, step: int, lr: float):
    """One optimiser update on this rank's rows of the global batch of ``step``."""
    for group in learner.optimizer.param_groups:
        group["lr"] = lr
    batch = producer.sample(step)
    rows = config.batch_size // world.size
    mine = batch.tokens[world.rank * rows : (world.rank + 1) * rows].to(world.device)
    # no host sync below: the loss, NaN flag and norm stay on the device until a log line
    micros = mine.chunk(config.grad_accum)  # DDP syncs gradients on the last one only
    for i, micro in enumerate(micros):
        sync = i == len(micros) - 1 or world.size == 1
        with contextlib.nullcontext() if sync else learner.ddp.no_sync():
            with autocast(config.precision, world.device):
                loss = causal_lm_loss(learner.ddp, micro)
            (loss / config.grad_accum).backward()
        learner.tally.add(loss.detach() / config.grad_accum)
    norm = torch.nn.utils.clip_grad_norm_(
        learner.model.parameters(), config.grad_clip or math.inf, foreach=True
    )
    learner.tally.bad |= ~torch.isfinite(norm)
    learner.optimizer.step()
    learner.optimizer.zero_grad(set_to_none=True)
    return norm, batch.info
