"""The minimal trainer: a decoder-only HF model from scratch on any producer, checkpoints on a
token schedule, exact resume, live probes, and DDP under ``torchrun``.

>>> run = train(TrainConfig(out="runs/demo", producer="iid", steps=200))   # doctest: +SKIP
>>> [c.tokens for c in ihprobe.checkpoints(run)][:3]                        # doctest: +SKIP
[0, 2048, 4096]

The run directory it writes is described in :mod:`ihprobe.io.runs`; the config in
:mod:`ihprobe.training.config`, the models in :mod:`ihprobe.io.architectures`, the processes in
:mod:`ihprobe.core.world`. Under ``torchrun --nproc_per_node N -m ihprobe train ...`` each rank
takes
its rows of the same global batch ``producer.sample(step)``, so ``batch_size`` stays the
sequences per update.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from ihprobe import __version__
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_directory, atomic_write, check_writable_dir
from ihprobe.core.standin import id_tokenizer
from ihprobe.core.world import World, is_main_process, join_world, world_size
from ihprobe.data import make_producer
from ihprobe.dynamics.forecast import FORECAST, LiveForecast, law_prior
from ihprobe.io.architectures import build_model, causal_lm_loss, model_sizes
from ihprobe.io.models import load, load_weights, quiet_progress
from ihprobe.io.runs import CHECKPOINT_META, METRICS, PROBES, RUN_META, RunDir, config_changes
from ihprobe.io.weights import weight_checksums
from ihprobe.probes.battery import scan
from ihprobe.training.config import (
    DEFAULT_STEPS,
    RESUMABLE_CHANGES,
    TrainConfig,
    check_config,
    load_config,
)
from ihprobe.training.schedule import checkpoint_steps, learning_rate

__all__ = ["DEFAULT_STEPS", "TrainConfig", "build_model", "causal_lm_loss", "load_config", "train"]

log = logging.getLogger(__name__)

ProbeHook = Callable[[dict], None]  # called with each probes.jsonl record (e.g. a forecast)


def make_run_producer(config: TrainConfig):
    """The config's producer, checked to deliver ``[batch_size, context]`` ids in its vocab."""
    producer = make_producer(
        config.producer,
        batch_size=config.batch_size,
        context=config.context,
        seed=config.seed,
        total_steps=config.total_steps,
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


# ----------------------------------------------------------------------------- training


def train(config: TrainConfig, *, on_probe: ProbeHook | None = None) -> Path:
    """Train a model from scratch as ``config`` says and return the run directory.

    Writes step-0 and scheduled checkpoints (standard HF directories that
    ``AutoModelForCausalLM.from_pretrained`` and :func:`ihprobe.load` open), ``run.json`` and
    ``metrics.jsonl``; with ``live_probes`` also ``probes.jsonl``. With ``resume`` it continues
    the run in ``config.out`` from its latest training state and ends with the same weights as
    an uninterrupted run; a finished run returns at once. ``on_probe`` is called with each
    live-probe record as it is written (rank 0), e.g. to update a forecast.

    While it trains, the process holds the run directory (:meth:`ihprobe.io.runs.RunDir.lock`): a
    second ``train`` on the same ``out`` fails at once instead of interleaving with it.

    Raises:
        IhprobeError: a bad config (before training starts), an existing run without
            ``resume``, a run directory another process holds, or a loss that became NaN/inf
            (the checkpoints written so far stay).

    Example:
        >>> run = train(TrainConfig(out="runs/x", producer="iid", steps=50))  # doctest: +SKIP
    """
    check_config(config, world_size())
    producer = make_run_producer(config)
    run = RunDir(config.out)
    check_writable_dir(config.out, "out")
    with run.lock() if is_main_process() else contextlib.nullcontext():
        _check_run_dir(run, config)
        with join_world(config.device) as world:
            trainer = _Trainer(config, producer, run, world, on_probe)
            if config.forecast and world.main:
                prior = law_prior(config.batch_size, config.context, law_from=config.law_from)
                trainer.forecaster = LiveForecast(run.root, prior)
            done = trainer.fit()
            del trainer  # DDP's reducer holds the process group: free it while the group lives
        return done


def _check_run_dir(run: RunDir, config: TrainConfig) -> None:
    if not run.exists():
        return
    if not config.resume:
        raise IhprobeError(
            f"{run.root} already holds a run; pass --resume to continue it, or choose another "
            "--out (checkpoints are never overwritten)."
        )
    if not (run.root / RUN_META).is_file():
        raise IhprobeError(f"{run.root} has checkpoints but no {RUN_META}: cannot resume it.")
    changed = config_changes(run.root, config.to_json(), ignore=RESUMABLE_CHANGES)
    if changed:
        diffs = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in sorted(changed.items()))
        raise IhprobeError(
            f"cannot resume {run.root} with a different config ({diffs}); resume with the same "
            "settings (ihprobe.training.trainer.load_config reads them) or start a new --out."
        )


class _Trainer:
    """One training run: the model, optimiser and the loop. Rank 0 writes every file."""

    def __init__(
        self, config: TrainConfig, producer, run: RunDir, world: World, on_probe: ProbeHook | None
    ):
        self.config, self.producer, self.run, self.world = config, producer, run, world
        self.on_probe = on_probe
        self.forecaster: LiveForecast | None = None  # with config.forecast, on rank 0
        self.total = config.total_steps
        self.schedule = checkpoint_steps(
            config.checkpoints,
            total=self.total,
            tokens_per_update=config.tokens_per_update,
            n=config.n_checkpoints,
        )
        self.sizes = model_sizes(config, producer.vocab_size, producer.special)
        self.raw = build_model(config, producer.vocab_size, producer.special).to(world.device)
        self.raw.train()
        self.model = self.raw
        if world.size > 1:
            ids = [world.device.index] if world.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.raw, device_ids=ids)
        self.optimizer = _adamw(self.raw, config)
        self.last_loss: float | None = None
        self.probe_model = None
        self.probed: set[int] = set()
        self.bad = torch.zeros((), dtype=torch.bool, device=world.device)
        self.window = _Window(0, world.device)

    # -- the loop

    def fit(self) -> Path:
        start = self._start()
        if start == self.total and self.run.checkpoint(self.total).is_dir():
            return self.run.root
        saves = set(self.schedule)
        bar = _progress(self.total, start, self.config.progress and self.world.main)
        for step in range(start, self.total):
            if step in saves:
                self.window.pause(self._save(step))
            elif self.config.state_every and step > start and step % self.config.state_every == 0:
                self.window.pause(self._save(step, checkpoint=False))
            lr, norm, info = self._update(step)
            done = step + 1
            if done % self.config.log_every == 0 or done == self.total:
                self._log(done, lr, norm, info, bar)
            bar.update(1)
        self._save(self.total)
        bar.close()
        return self.run.root

    def _update(self, step: int) -> tuple[float, torch.Tensor, dict]:
        """One optimiser update on this rank's rows of the global batch of ``step``."""
        cfg, world = self.config, self.world
        lr = learning_rate(
            step, lr=cfg.lr, total=self.total, warmup=cfg.warmup, schedule=cfg.schedule
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        batch = self.producer.sample(step)
        rows = cfg.batch_size // world.size
        mine = batch.tokens[world.rank * rows : (world.rank + 1) * rows].to(world.device)
        micros = mine.chunk(cfg.grad_accum)  # DDP syncs gradients on the last one only
        for i, micro in enumerate(micros):
            sync = i == len(micros) - 1 or world.size == 1
            with contextlib.nullcontext() if sync else self.model.no_sync():
                loss = causal_lm_loss(self.model, micro)
                (loss / cfg.grad_accum).backward()
            self.window.add(loss.detach() / cfg.grad_accum)
            self.bad |= ~torch.isfinite(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(
            self.raw.parameters(), cfg.grad_clip or math.inf, foreach=True
        )
        self.bad |= ~torch.isfinite(norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return lr, norm, batch.info

    def _log(self, done: int, lr: float, norm: torch.Tensor, info: dict, bar) -> None:
        """Append the metrics of the updates since the last log; refresh the progress bar."""
        self._check_finite(done)
        loss = self.world.mean(self.window.mean(done)).item()
        speed = self.window.tokens_per_s(done, self.config.tokens_per_update)
        self.last_loss = loss
        if self.world.main:
            record = {
                "step": done,
                "tokens": done * self.config.tokens_per_update,
                "loss": loss,
                "lr": lr,
                "grad_norm": norm.item(),
                "tokens_per_s": speed,
                "data": {k: float(v) for k, v in info.items()},
            }
            if self.window.start % self.config.log_every:  # resumed from a state without it
                record["partial_window"] = done - self.window.start
            self.run.append(METRICS, record)
        bar.set_postfix(self._postfix(loss, speed), refresh=False)
        self.window.reset(done)

    def _check_finite(self, step: int) -> None:
        bad = self.world.mean(self.bad.float()) > 0
        if bad.item():
            last = self.run.latest_checkpoint() or "none"
            raise IhprobeError(
                f"the loss or gradient became NaN/inf by update {step}; training stopped. The "
                f"last good checkpoint is {last}. Lower --lr, lengthen the warm-up or clip "
                "gradients, then start a new --out."
            )

    def _postfix(self, loss: float, speed: float) -> dict:
        out = {"loss": f"{loss:.3f}", "tok/s": f"{speed:,.0f}"}
        probes = self.run.records(PROBES) if self.config.live_probes and self.world.main else []
        if probes:
            out["max PS"] = f"{probes[-1]['max_prefix_matching']:.2f}"
        if self.forecaster is not None and self.forecaster.latest is not None:
            out["emergence"] = self.forecaster.latest.postfix()
        return out

    # -- start and resume

    def _start(self) -> int:
        """The first update to run: 0 for a new run, the saved step for a resumed one."""
        latest = self.run.latest_state() if self.config.resume else None
        if latest is None and self.run.has_checkpoints():
            raise IhprobeError(
                f"{self.run.root} has checkpoints but no training state in {self.run.state} to "
                "resume from; start a new --out."
            )
        if self.world.main:
            self.run.root.mkdir(parents=True, exist_ok=True)
            self.run.remove_partial_writes()
            if latest is None:
                self.run.write_json(RUN_META, self._run_meta())
        self.world.barrier()
        if latest is None:
            return 0
        step = self._restore(latest)
        if self.world.main:  # the logs continue from the state as if never interrupted
            self.run.truncate(METRICS, step)
            self.run.truncate(PROBES, step)
            self.run.truncate(FORECAST, step)
            self.probed = {r["step"] for r in self.run.records(PROBES)}
        log.info("resuming %s from update %d", self.run.root, step)
        self.world.barrier()
        return step

    def _restore(self, latest: Path) -> int:
        """Weights, optimiser, RNG and the open loss window of a saved state; its step."""
        state = torch.load(latest, map_location=self.world.device, weights_only=True)
        self.raw.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng_cpu"].cpu())
        if "rng_cuda" in state and self.world.device.type == "cuda":
            torch.cuda.set_rng_state(state["rng_cuda"].cpu(), self.world.device)
        self.last_loss = state["loss"].item() if state["loss"].numel() else None
        step = int(state["step"])
        self.window.reset(step)
        if "window_start" in state:  # the losses since the last log line, as if never stopped
            self.window.start = int(state["window_start"])
            self.window.loss.copy_(state["window_loss"])
        return step

    def _run_meta(self) -> dict:
        return {
            "config": self.config.to_json(),
            "steps": self.total,
            "tokens": self.total * self.config.tokens_per_update,
            "tokens_per_update": self.config.tokens_per_update,
            "checkpoint_steps": self.schedule,
            "model": self.sizes,
            "hf_config": self.raw.config.to_dict(),
            "data": {"producer": self.config.producer, **self.producer.config()},
            "world_size": self.world.size,
            "versions": {
                "ihprobe": __version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
        }

    # -- checkpoints

    def _save(self, step: int, checkpoint: bool = True) -> float:
        """State, checkpoint and live probes for ``step`` (those not there yet); seconds taken.

        The state goes first: a kill between the two leaves a state that the resumed run
        continues from, and it then writes the missing checkpoint.
        """
        begin = time.perf_counter()
        self._check_finite(step)
        window_loss = self.world.mean(self.window.loss)  # every rank's share of the open window
        if self.world.main:
            if not self.run.state_file(step).is_file():
                self._write_state(step, window_loss)
            if checkpoint and not self.run.checkpoint(step).is_dir():
                self._write_checkpoint(step)
            if checkpoint and self.config.live_probes and step not in self.probed:
                self._probe(step)
        self.world.barrier()
        return time.perf_counter() - begin

    def _write_state(self, step: int, window_loss: torch.Tensor) -> None:
        """Weights, optimiser and RNG as plain tensors (``torch.load(weights_only=True)``)."""
        state = {
            "step": torch.tensor(step),
            "model": self.raw.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "loss": torch.tensor([] if self.last_loss is None else [self.last_loss]),
            "window_start": torch.tensor(self.window.start),
            "window_loss": window_loss,
        }
        if self.world.device.type == "cuda":
            state["rng_cuda"] = torch.cuda.get_rng_state(self.world.device)
        atomic_write(self.run.state_file(step), lambda tmp: torch.save(state, tmp))
        for old in self.run.state.glob("step-*.pt"):  # only the latest is needed to resume
            if old != self.run.state_file(step):
                old.unlink()

    def _write_checkpoint(self, step: int) -> None:
        """An HF directory written under a temporary name and renamed when complete; its
        ``ihprobe.json`` records the SHA-256 of each weight file, which :func:`ihprobe.load`
        checks."""
        with atomic_directory(self.run.checkpoint(step)) as tmp:
            with quiet_progress():
                self.raw.save_pretrained(tmp)
            self._save_tokenizer(tmp)
            meta = {**self._checkpoint_meta(step), "sha256": weight_checksums(tmp)}
            atomic_write(tmp / CHECKPOINT_META, json.dumps(meta, indent=2) + "\n")

    def _checkpoint_meta(self, step: int) -> dict:
        return {
            "step": step,
            "tokens": step * self.config.tokens_per_update,
            "batch_size": self.config.batch_size,
            "context": self.config.context,
            "run": self.run.root.name,
            "model": self.sizes,
            "data": {"producer": self.config.producer, **self.producer.config()},
            "producer_step": step,  # the producer is a pure function of (seed, step)
            "seed": self.config.seed,
            "loss": self.last_loss,  # mean training loss of the last logged updates
            "lr": self.config.lr,
            "world_size": self.world.size,
        }

    def _save_tokenizer(self, directory: Path) -> None:
        if self.producer.tokenizer() is not None:
            self.producer.save_tokenizer(directory)
            return
        id_tokenizer(self.producer.vocab_size).save_pretrained(str(directory))

    def _probe(self, step: int) -> None:
        """Max prefix-matching score and AR accuracy of checkpoint ``step``."""
        ckpt = self.run.checkpoint(step)
        # probing must not move the training RNG
        with torch.random.fork_rng(devices=[]), quiet_progress():
            if self.probe_model is None:
                self.probe_model = load(ckpt, device=self.world.device)
            else:
                load_weights(self.probe_model, ckpt)
            scores = scan(
                self.probe_model,
                metrics=["prefix_matching", "ar_accuracy"],
                batch=self.config.probe_batch,
            )
        ps = scores.head["prefix_matching"]
        best = int(ps.argmax())
        record = {
            "step": step,
            "tokens": step * self.config.tokens_per_update,
            "max_prefix_matching": float(ps.max()),
            "top_head": [best // ps.shape[1], best % ps.shape[1]],
            "ar_accuracy": float(scores.model["ar_accuracy"]),
        }
        self.run.append(PROBES, record)
        self.probed.add(step)
        if self.forecaster is not None:
            self.forecaster(record)
        if self.on_probe is not None:
            self.on_probe(record)


class _Window:
    """Loss sum and training time since the last log (time spent saving does not count).

    A resumed run restores ``start`` and ``loss`` from its state, so its first log line averages
    the same updates as an uninterrupted run's; the speed counts from the resume (``timed``).
    """

    def __init__(self, start: int, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.reset(start)

    def reset(self, step: int) -> None:
        self.loss.zero_()
        self.start = self.timed = step
        self.paused, self.tick = 0.0, time.perf_counter()

    def add(self, loss: torch.Tensor) -> None:
        self.loss += loss

    def pause(self, seconds: float) -> None:
        self.paused += seconds

    def mean(self, step: int) -> torch.Tensor:
        return self.loss / max(1, step - self.start)

    def tokens_per_s(self, step: int, tokens_per_update: int) -> float:
        elapsed = time.perf_counter() - self.tick - self.paused
        return (step - self.timed) * tokens_per_update / max(elapsed, 1e-9)


def _adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """Fused AdamW (0.9, 0.999); weight decay on matrices only, as in nanoGPT."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.999), fused=True)


def _progress(total: int, start: int, enabled: bool):
    return tqdm(total=total, initial=start, disable=not enabled, unit="upd", dynamic_ncols=True)
