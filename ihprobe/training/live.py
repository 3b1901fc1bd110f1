"""Live probes: max prefix matching and AR accuracy of the training model at each checkpoint,
appended to ``probes.jsonl`` and passed to one listener (forecast, display, the caller's hook).

The probe model is loaded once, from the first checkpoint probed; after that the training
model's weights are copied into it in memory (:func:`ihprobe.io.swap.swap_weights`), so no
checkpoint is read back from disk.

>>> record = {"step": 8, "max_prefix_matching": 0.7}
>>> heard = listener(None, None, lambda r: print(r["step"]))
>>> heard(record)
8
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ihprobe.core.world import World
from ihprobe.dynamics.forecast import LiveForecast
from ihprobe.dynamics.prior import law_prior
from ihprobe.io.models import load, quiet_progress
from ihprobe.io.runs import PROBES, RunDir
from ihprobe.io.swap import swap_weights
from ihprobe.probes.battery import scan

ProbeHook = Callable[[dict], None]  # called with each probes.jsonl record
PROBE_METRICS = ["prefix_matching", "ar_accuracy"]


class LiveProbes:
    """Probe the training model at checkpoints; each step once, also across a resume.

    Example:
        >>> probes = LiveProbes(RunDir("runs/x"), batch=20, tokens_per_update=2048,
        ...                     device="cpu", on_probe=print)         # doctest: +SKIP
        >>> probes(400, model)   # after checkpoint 400 is written     # doctest: +SKIP
    """

    def __init__(
        self, run: RunDir, *, batch: int, tokens_per_update: int, device, on_probe: ProbeHook
    ):
        self.run, self.batch, self.device = run, batch, device
        self.tokens_per_update, self.on_probe = tokens_per_update, on_probe
        self.model = None  # the hooked probe model, once loaded
        self.done = {r["step"] for r in run.records(PROBES)}

    def __call__(self, step: int, weights: torch.nn.Module) -> None:
        """Probe ``weights`` (the HF training model) as checkpoint ``step``, unless done."""
        if step in self.done:
            return
        tokens = step * self.tokens_per_update
        with torch.random.fork_rng(devices=[]), quiet_progress():  # keep the training RNG
            if self.model is None:
                self.model = load(self.run.checkpoint(step), device=self.device)
            else:
                swap_weights(self.model, weights.state_dict(), step=step, tokens=tokens)
            scores = scan(self.model, metrics=PROBE_METRICS, batch=self.batch)
        ps = scores.head["prefix_matching"]
        best = int(ps.argmax())
        record = {
            "step": step,
            "tokens": tokens,
            "max_prefix_matching": float(ps.max()),
            "top_head": [best // ps.shape[1], best % ps.shape[1]],
            "ar_accuracy": float(scores.model["ar_accuracy"]),
        }
        self.run.append(PROBES, record)
        self.done.add(step)
        self.on_probe(record)


def listener(forecast: LiveForecast | None, display, hook: ProbeHook | None) -> ProbeHook:
    """The one callback for a live probe: the forecast first, then the display (which shows
    both), then the caller's ``hook``. Any of them may be None."""

    def heard(record: dict) -> None:
        if forecast is not None:
            forecast(record)
        if display is not None:
            display.probed(record, forecast.latest if forecast is not None else None)
        if hook is not None:
            hook(record)

    return heard


def make_live_probes(config, run: RunDir, world: World, display, on_probe) -> LiveProbes | None:
    """The live probes, on rank 0 with ``live_probes``, telling one listener of each record:
    the forecast (with ``forecast``), the display, then ``on_probe``."""
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
