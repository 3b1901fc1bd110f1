"""The minimal trainer: a decoder-only HF model from scratch on any producer, checkpoints on a
token schedule, exact resume, live probes, and DDP under ``torchrun``.

>>> run = train(TrainConfig(out="runs/demo", producer="iid", steps=200))   # doctest: +SKIP
>>> [c.tokens for c in ihprobe.checkpoints(run)][:3]                        # doctest: +SKIP
[0, 2048, 4096]

The loop is :func:`_train`; its parts live beside it: what a checkpoint writes
(:mod:`~ihprobe.training.checkpoints`), resuming and extending a run
(:mod:`~ihprobe.training.resume`), the live probes (:mod:`~ihprobe.training.live`) and the
progress bar (:mod:`~ihprobe.training.display`). The run directory is described in
:mod:`ihprobe.io.runs`, the config in :mod:`ihprobe.training.config`, the processes in
:mod:`ihprobe.core.world`. Under ``torchrun --nproc_per_node N -m ihprobe train ...`` each rank
takes its rows of the same global batch ``producer.sample(step)``, so ``batch_size`` stays the
sequences per update.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from ihprobe.core.devices import describe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import check_writable_dir
from ihprobe.core.world import World, is_main_process, join_world, world_size
from ihprobe.data import make_producer
from ihprobe.dynamics.forecast import FORECAST, LiveForecast
from ihprobe.dynamics.prior import law_prior
from ihprobe.io.architectures import build_model, causal_lm_loss, model_sizes
from ihprobe.io.runs import METRICS, PROBES, RUN_META, RunDir
from ihprobe.training import checkpoints
from ihprobe.training.config import (
    DEFAULT_STEPS,
    TrainConfig,
    check_config,
    check_training_size,
    load_config,
)
from ihprobe.training.display import Display
from ihprobe.training.live import LiveProbes, ProbeHook, listener
from ihprobe.training.precision import autocast, compiled, matmul_precision
from ihprobe.training.resume import (
    Plan,
    check_run_folder,
    plan_run,
    read_state,
    record_extension,
    restore,
)
from ihprobe.training.schedule import learning_rate
from ihprobe.training.tally import Tally

__all__ = ["DEFAULT_STEPS", "TrainConfig", "build_model", "causal_lm_loss", "load_config", "train"]

log = logging.getLogger(__name__)


def make_run_producer(config: TrainConfig, total_steps: int | None = None):
    """The config's producer, checked to deliver ``[batch_size, context]`` ids in its vocab.
    ``total_steps`` (default the config's) is the length annealing producers plan for."""
    producer = make_producer(
        config.producer,
        batch_size=config.batch_size,
        context=config.context,
        seed=config.seed,
        total_steps=total_steps or config.total_steps,
        **config.producer_options,
    )
    tokens = producer.sample(0).tokens
    if tuple(tokens.shape) != (config.batch_size, config.context):
        raise IhprobeError(
            f"producer {config.producer!r} gives batches of shape {tuple(tokens.shape)}, not "
            f"(batch_size, context) = ({config.batch_size}, {config.context}); lower --context "
            "to what it provides or change its options."
        )
    if tokens.dtype != torch.long or tokens.min() < 0 or tokens.max() >= producer.vocab_size:
        raise IhprobeError(
            f"producer {config.producer!r} gives ids outside 0..{producer.vocab_size - 1}."
        )
    return producer


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
    producer = make_run_producer(config)  # its options checked, its tables estimated
    check_training_size(config)  # before any model tensor: refused past memory, announced
    run = RunDir(config.out)
    check_writable_dir(config.out, "out")
    with run.lock() if is_main_process() else contextlib.nullcontext():
        plan = plan_run(run, config)
        if plan.first_total != config.total_steps:  # extended: the data keeps its first plan
            producer = make_run_producer(config, plan.first_total)
        with join_world(config.device) as world:
            with matmul_precision(config.precision, world.device):
                return _train(config, plan, producer, run, world, on_probe)


def as_config(config) -> TrainConfig:
    """``config`` itself, or a :class:`TrainConfig` of a dict's fields; else one line.

    >>> as_config({"producer": "iid", "steps": 5}).steps
    5
    """
    fields = TrainConfig.__dataclass_fields__
    if isinstance(config, dict) and all(k in fields for k in config):
        return TrainConfig(**config)
    if not isinstance(config, (TrainConfig, dict)):
        raise IhprobeError(f"config must be a TrainConfig or a dict (got {type(config).__name__}).")
    unknown = sorted(str(k) for k in config if k not in fields) if isinstance(config, dict) else []
    if unknown:
        raise IhprobeError(
            f"TrainConfig has no field {', '.join(unknown)}: its fields are {', '.join(fields)}."
        )
    return config


@dataclass
class _Learner:
    """What an update changes: the weights (``ddp`` wraps ``model`` under DDP and, with
    ``compile``, is compiled; both share ``model``'s parameters), the optimiser, and the running
    loss."""

    model: torch.nn.Module
    ddp: torch.nn.Module
    optimizer: torch.optim.Optimizer
    tally: Tally


def _train(config, plan: Plan, producer, run: RunDir, world: World, on_probe) -> Path:
    """The loop: save where the schedule says, update, log; rank 0 writes every file."""
    model = build_model(config, producer.vocab_size, producer.special).to(world.device)
    model.train()
    ids = [world.device.index] if world.device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids) if world.size > 1 else model
    ddp = compiled(ddp, config.compile)
    learner = _Learner(model, ddp, _adamw(model, config), Tally(world.device))
    start = _start(config, plan, producer, run, world, learner)
    if start == plan.total and run.checkpoint(plan.total).is_dir():
        return run.root
    display = Display(total=plan.total, start=start, enabled=config.progress and world.main)
    live = _live(config, run, world, display, on_probe)
    save = _Saver(config, producer, run, world, learner, live)
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
        if (step + 1) % config.log_every == 0 or step + 1 == plan.total:
            display.logged(*_log(config, run, world, learner, step + 1, lr, norm, info))
        display.advance()
    save(plan.total)
    display.close()
    if world.main:
        checkpoints.record_seconds(run, learner.tally.seconds())
    return run.root


def _update(config, producer, world: World, learner: _Learner, step: int, lr: float):
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


def _log(config, run: RunDir, world: World, learner: _Learner, done: int, lr, norm, info):
    """Append the metrics of the updates since the last log; the loss and speed."""
    tally = learner.tally
    _check_finite(run, world, tally, done)
    loss = world.mean(tally.mean(done)).item()
    speed = tally.tokens_per_s(done, config.tokens_per_update)
    if world.main:
        record = {
            "step": done,
            "tokens": done * config.tokens_per_update,
            "loss": loss,
            "lr": lr,
            "grad_norm": norm.item(),
            "tokens_per_s": speed,
            "data": {k: float(v) for k, v in info.items()},
        }
        if tally.start % config.log_every:  # resumed from a state without its window
            record["partial_window"] = done - tally.start
        run.append(METRICS, record)
    tally.last_loss = loss
    tally.reset(done)
    return loss, speed


def _check_finite(run: RunDir, world: World, tally: Tally, step: int) -> None:
    if world.mean(tally.bad.float()).item() > 0:
        last = run.latest_checkpoint() or "none"
        raise IhprobeError(
            f"the loss or gradient became NaN/inf by update {step}; training stopped. The "
            f"last good checkpoint is {last}. Lower --lr, lengthen the warm-up or clip "
            "gradients, then start a new --out."
        )


# ----------------------------------------------------------------------------- start and save


def _start(config, plan: Plan, producer, run: RunDir, world: World, learner: _Learner) -> int:
    """The first update to run: 0 for a new run, the saved step for a resumed one."""
    latest = run.latest_state() if run.exists() else None
    if latest is None and run.has_checkpoints():
        raise IhprobeError(
            f"{run.root} has checkpoints but no training state in {run.state} to resume from; "
            "start a new --out."
        )
    state = None
    if latest is not None:  # checked before anything is loaded or written
        last = plan.total if plan.extension is None else plan.extension["from_steps"]
        state = read_state(
            latest,
            model=learner.model,
            optimizer=learner.optimizer,
            device=world.device,
            last_step=last,
        )
    if world.main:
        run.root.mkdir(parents=True, exist_ok=True)
        run.remove_partial_writes()
        if state is None:
            meta = checkpoints.new_run_meta(
                config,
                schedule=plan.schedule,
                sizes=_sizes(config, producer),
                hf_config=learner.model.config.to_dict(),
                data=_data(config, producer),
                world_size=world.size,
            )
            run.write_json(RUN_META, meta)
        elif plan.extension is not None:
            record_extension(run, config, plan)
        checkpoints.record_device(run, describe(world.device))
    world.barrier()
    if state is None:
        return 0
    restore(state, model=learner.model, optimizer=learner.optimizer, device=world.device)
    step = learner.tally.restore(state)
    if world.main:  # the logs continue from the state as if never interrupted
        for name in (METRICS, PROBES, FORECAST):
            run.truncate(name, step)
    log.info("resuming %s from update %d", run.root, step)
    world.barrier()
    return step


class _Saver:
    """Saves at an update: the training state, the checkpoint and its live probe (those not
    there yet); returns the seconds taken. The state goes first: a kill between the two leaves
    a state that the resumed run continues from, and it then writes the missing checkpoint."""

    def __init__(self, config, producer, run: RunDir, world: World, learner: _Learner, live):
        self.config, self.producer, self.run = config, producer, run
        self.world, self.learner, self.live = world, learner, live

    def __call__(self, step: int, checkpoint: bool = True) -> float:
        begin = time.perf_counter()
        run, world, learner = self.run, self.world, self.learner
        _check_finite(run, world, learner.tally, step)
        window_loss = world.mean(learner.tally.loss)  # every rank's share of the open window
        if world.main:
            if not run.state_file(step).is_file():
                checkpoints.write_state(run, step, self._state(step, window_loss))
            if checkpoint and not run.checkpoint(step).is_dir():
                meta = checkpoints.checkpoint_meta(
                    self.config,
                    run,
                    step,
                    sizes=_sizes(self.config, self.producer),
                    data=_data(self.config, self.producer),
                    loss=learner.tally.last_loss,
                    world_size=world.size,
                )
                checkpoints.write_checkpoint(run, step, learner.model, self.producer, meta)
            if checkpoint and self.live is not None:
                self.live(step, learner.model)
        world.barrier()
        return time.perf_counter() - begin

    def _state(self, step: int, window_loss: torch.Tensor) -> dict:
        """Weights, optimiser and RNG as plain tensors (``torch.load(weights_only=True)``)."""
        learner, last = self.learner, self.learner.tally.last_loss
        state = {
            "step": torch.tensor(step, device="cpu"),
            "model": learner.model.state_dict(),
            "optimizer": learner.optimizer.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "loss": torch.tensor([] if last is None else [last], device="cpu"),
            "window_start": torch.tensor(learner.tally.start, device="cpu"),
            "window_loss": window_loss,
            "train_seconds": torch.tensor(
                learner.tally.seconds(), dtype=torch.float64, device="cpu"
            ),
        }
        if self.world.device.type == "cuda":
            state["rng_cuda"] = torch.cuda.get_rng_state(self.world.device)
        return state


def _live(config, run: RunDir, world: World, display: Display, on_probe) -> LiveProbes | None:
    """The live probes, on rank 0 with ``live_probes``, telling one listener of each record."""
    if not (config.live_probes and world.main):
        return None
    forecast = None
    if config.forecast:
        prior = law_prior(config.batch_size, config.context, law_from=config.law_from)
        forecast = LiveForecast(run.root, prior)
    hear = listener(forecast, display, on_probe)
    per_update = config.tokens_per_update
    return LiveProbes(
        run,
        batch=config.probe_batch,
        tokens_per_update=per_update,
        device=world.device,
        on_probe=hear,
    )


def _sizes(config, producer) -> dict:
    return model_sizes(config, producer.vocab_size, producer.special)


def _data(config, producer) -> dict:
    return {"producer": config.producer, **producer.config()}


# ----------------------------------------------------------------------------- small parts


def _adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """Fused AdamW (0.9, 0.999); weight decay on matrices only, as in nanoGPT."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.999), fused=True)
