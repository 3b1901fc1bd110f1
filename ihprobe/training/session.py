"""Where a training session starts and what it saves: :func:`start_session` writes a new run's
``run.json`` or restores the latest training state (the logs cut back to it), and a
:class:`Saver` writes the state, the checkpoint and its live probe at an update. What those
files hold is :mod:`~ihprobe.training.checkpoints`; the checks of a resume are
:mod:`~ihprobe.training.resume`.

>>> from ihprobe.training.inputs import make_run_producer
>>> config = TrainConfig(producer="iid", batch_size=2, context=16)
>>> run_data(config, make_run_producer(config))["vocab_size"]
128
"""

from __future__ import annotations

import logging
import time

import torch

from ihprobe.core.devices import describe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.world import World
from ihprobe.dynamics.forecast import FORECAST
from ihprobe.io.architectures import model_sizes
from ihprobe.io.runs import METRICS, PROBES, RUN_META, RunDir
from ihprobe.training import checkpoints
from ihprobe.training.config import TrainConfig
from ihprobe.training.learner import Learner
from ihprobe.training.metrics_log import check_finite
from ihprobe.training.resume import Plan, read_state, record_extension, restore

log = logging.getLogger(__name__)


def start_session(config, plan: Plan, producer, run: RunDir, world: World, learner: Learner) -> int:
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
                sizes=run_sizes(config, producer),
                hf_config=learner.model.config.to_dict(),
                data=run_data(config, producer),
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


class Saver:
    """Saves at an update: the training state, the checkpoint and its live probe (those not
    there yet); returns the seconds taken. The state goes first: a kill between the two leaves
    a state that the resumed run continues from, and it then writes the missing checkpoint."""

    def __init__(self, config, producer, run: RunDir, world: World, learner: Learner, live):
        self.config, self.producer, self.run = config, producer, run
        self.world, self.learner, self.live = world, learner, live

    def __call__(self, step: int, checkpoint: bool = True) -> float:
        begin = time.perf_counter()
        run, world, learner = self.run, self.world, self.learner
        check_finite(run, world, learner.tally, step)
        window_loss = world.mean(learner.tally.loss)  # every rank's share of the open window
        if world.main:
            if not run.state_file(step).is_file():
                checkpoints.write_state(run, step, self._state(step, window_loss))
            if checkpoint and not run.checkpoint(step).is_dir():
                meta = checkpoints.checkpoint_meta(
                    self.config,
                    run,
                    step,
                    sizes=run_sizes(self.config, self.producer),
                    data=run_data(self.config, self.producer),
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


def run_sizes(config: TrainConfig, producer) -> dict:
    """The model's sizes, as ``run.json`` and each checkpoint record them."""
    return model_sizes(config, producer.vocab_size, producer.special)


def run_data(config: TrainConfig, producer) -> dict:
    """The producer's name and settings, as ``run.json`` and each checkpoint record them."""
    return {"producer": config.producer, **producer.config()}
