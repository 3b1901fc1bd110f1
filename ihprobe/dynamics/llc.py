"""The local learning coefficient (LLC) at every checkpoint of a run, from devinterp's SGLD.

The LLC measures how degenerate the loss landscape is around a checkpoint's weights ``w*``:
SGLD samples weights near ``w*`` from the tempered, localised posterior, and
``LLC = n_beta * (E[loss] - loss(w*))``. Developmental interpretability reads stages of
training from where the LLC changes; :func:`llc_stages` finds them with the same change-point
fit as the prefix-matching trajectory (:func:`ihprobe.emergence`).

devinterp is an optional extra (``pip install 'ihprobe[llc]'``). The SGLD settings are stated
in :class:`SGLDSettings`; the diagnostics devinterp asks users to look at (the loss trace of
every chain, the spread of the chains, the sign of the estimate) come with every checkpoint
(:attr:`LLCTrajectory.checks`), and ``docs/forecast.md`` says how they were chosen.

>>> traj = llc_trajectory("runs/demo/main")                        # doctest: +SKIP
>>> traj.frame[["step", "llc_mean", "llc_std"]].head(3)             # doctest: +SKIP
>>> llc_stages(traj).tokens                                         # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import trange

from ihprobe.core import cache as results_cache  # `cache` is an argument here
from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.stages import announced_work
from ihprobe.data import make_producer
from ihprobe.dynamics.changepoint import EmergencePoint, emergence
from ihprobe.io.models import load_hf
from ihprobe.io.runs import RUN_META, checkpoints, run_meta
from ihprobe.io.weights import weights_hash
from ihprobe.series.estimates import forward_flops, seconds_each
from ihprobe.series.sweep import walk

log = logging.getLogger(__name__)

EXTRA = "pip install 'ihprobe[llc]'"
CACHE_VERSION = 2  # 2: entries carry a checksum and are checked when read
METRIC = "llc"


@dataclass(frozen=True)
class SGLDSettings:
    """SGLD hyperparameters of the LLC estimate (devinterp's names in brackets).

    Defaults were calibrated on the demo's 2-layer d64 models (``docs/forecast.md``): with
    them the chains' loss traces level off within 100 draws at trained checkpoints, where
    smaller steps or a weaker localisation leave them still climbing. The inverse temperature
    is devinterp's default ``n / ln n`` with ``n`` the tokens predicted per SGLD step (the loss
    is a per-token mean). Chains and draws are devinterp's defaults.

    Example:
        >>> SGLDSettings(draws=100).chains, SGLDSettings(draws=100).draws
        (4, 100)
    """

    lr: float = 1e-3  # step size epsilon [lr]
    localization: float = 300.0  # pull gamma towards w* [localization]
    n_beta: float | None = None  # inverse temperature [n_beta]; None: n / ln(n), see above
    chains: int = 4  # [num_chains]
    draws: int = 200  # SGLD steps per chain, each one a draw [num_draws]
    batch_size: int = 32  # rows per SGLD step [batch_size]
    init_batches: int = 8  # minibatches that measure loss(w*) [num_init_loss_batches]
    rows: int = 1024  # rows of the run's own data distribution to sample minibatches from
    seed: int = 0  # SGLD noise [init_seed]

    def __post_init__(self) -> None:
        for name in ("chains", "draws", "batch_size", "init_batches", "rows"):
            checks.count(name, getattr(self, name))
        for name in ("lr", "localization") + (("n_beta",) if self.n_beta is not None else ()):
            checks.positive(name, getattr(self, name))
        checks.seed(self.seed)

    def beta(self, context: int) -> float:
        """``n_beta``, or ``n / ln n`` for ``n = batch_size * (context - 1)`` predicted tokens."""
        if self.n_beta is not None:
            return self.n_beta
        n = self.batch_size * (context - 1)
        return n / math.log(n)


@dataclass
class LLCTrajectory:
    """LLC per checkpoint (``frame``: ``step, tokens, llc_mean, llc_std, init_loss``, per-chain
    values in ``llc_chains``) and every chain's loss trace (``traces``: ``step, chain, draw,
    loss``), with the settings that made them."""

    frame: pd.DataFrame
    traces: pd.DataFrame
    settings: SGLDSettings
    run: str

    @property
    def checks(self) -> pd.DataFrame:
        """Per checkpoint: is the estimate finite and positive, did the chains' loss traces
        level off (last quarter within 10% of the rise above ``loss(w*)`` of the second
        quarter), and do the chains agree (sd across chains below half the mean)?"""
        rows = []
        for step, group in self.traces.groupby("step"):
            row = self.frame[self.frame.step == step].iloc[0]
            per_draw = group.groupby("draw")["loss"].mean().to_numpy()
            quarter = max(len(per_draw) // 4, 1)
            second = per_draw[quarter : 2 * quarter].mean()
            last = per_draw[-quarter:].mean()
            rise = max(abs(last - row.init_loss), 1e-12)
            rows.append(
                {
                    "step": step,
                    "finite": bool(np.isfinite(row.llc_mean)),
                    "positive": bool(row.llc_mean > 0),
                    "levelled": bool(abs(last - second) <= 0.1 * rise),
                    "chains_agree": bool(row.llc_std <= 0.5 * abs(row.llc_mean)),
                }
            )
        return pd.DataFrame(rows)

    def to_table(self) -> pd.DataFrame:
        """The LLC as a trajectory table (``metric == "llc"``) for :func:`ihprobe.emergence`."""
        return pd.DataFrame(
            {
                "model": self.run,
                "step": self.frame.step,
                "tokens": self.frame.tokens,
                "metric": METRIC,
                "value": self.frame.llc_mean,
            }
        )


def llc_trajectory(
    run: str | os.PathLike,
    settings: SGLDSettings = SGLDSettings(),
    *,
    cache: bool | str | os.PathLike | None = True,
    progress: bool | None = None,
) -> LLCTrajectory:
    """devinterp's SGLD estimate of the LLC at every checkpoint of an ihprobe run.

    Minutes a checkpoint on a CPU: a warning before the first when a rough estimate of the
    whole (the model's size times the SGLD work) is minutes, a tqdm bar over the checkpoints
    (``progress``; None, the default: on a terminal only), and a warning with the time left
    once the first is done where there was no estimate.

    The SGLD minibatches are rows of the run's own training distribution (its producer, at
    steps past the end of training). Each checkpoint's estimate is cached under its weights
    hash, the settings and the data, like the scans of :func:`ihprobe.trajectory`.

    Example:
        >>> traj = llc_trajectory("runs/demo/main", SGLDSettings(draws=100))  # doctest: +SKIP
    """
    checks.source(run, "run")
    sampler = _sampler()
    config = _run_config(run)
    rows = _rows(config, settings)
    data_key = hashlib.sha256(rows.numpy().tobytes()).hexdigest()[:16]
    settings_key = results_cache.key(
        {**asdict(settings), "data": data_key, "version": CACHE_VERSION}
    )
    directory = results_cache.root(cache)
    ckpts = checkpoints(run)
    steps = settings.chains * (settings.draws + settings.init_batches)

    def work(shape: dict) -> float:  # each SGLD step a forward and a backward pass (3x)
        at_context = {**shape, "context": config["context"]}
        return 3 * forward_flops(at_context, settings.batch_size, steps)

    with announced_work(log, "LLC", len(ckpts), seconds_each(ckpts, work)):
        frames, traces = _sweep(ckpts, directory, sampler, rows, settings, settings_key, progress)
    return LLCTrajectory(
        pd.DataFrame(frames), pd.concat(traces, ignore_index=True), settings, str(run)
    )


def _sweep(ckpts, directory, sampler, rows, settings, settings_key: str, progress) -> tuple:
    """Each checkpoint's LLC (from the results cache where it is there): summaries, traces."""
    frames, traces = [], []
    for ckpt in walk(ckpts, progress=progress, desc="LLC"):
        file = None
        if directory is not None:
            file = directory / "llc" / f"{weights_hash(ckpt.source)[:32]}-{settings_key}.json"
        result = results_cache.read(file, _checked_result)
        if result is None:
            result = sampler(Path(ckpt.source), rows, settings)
            if file is not None:
                results_cache.write(file, result)
        frames.append({"step": ckpt.step, "tokens": ckpt.tokens, **_summary(result)})
        trace = np.asarray(result["trace"], dtype=float)  # [chain, draw]
        chain, draw = np.indices(trace.shape)
        traces.append(
            pd.DataFrame(
                {
                    "step": ckpt.step,
                    "chain": chain.ravel(),
                    "draw": draw.ravel(),
                    "loss": trace.ravel(),
                }
            )
        )
    return frames, traces


def llc_stages(traj: LLCTrajectory, segments: int = 3) -> EmergencePoint:
    """The change point of the LLC curve, by the same piecewise fit as prefix matching.

    Example:
        >>> tokens = [0] + [2**k * 1000 for k in range(12)]
        >>> frame = pd.DataFrame({"step": [x // 1000 for x in tokens], "tokens": tokens,
        ...     "llc_mean": [5.0] * 7 + [20.0] * 6, "llc_std": 0.5, "init_loss": 3.0})
        >>> traj = LLCTrajectory(frame, pd.DataFrame(), SGLDSettings(), run="r")
        >>> stage = llc_stages(traj)
        >>> stage.transition, stage.tokens_low, stage.tokens_high
        (True, 32000.0, 64000.0)
    """
    if not isinstance(traj, LLCTrajectory):
        raise IhprobeError(
            f"llc_stages takes llc_trajectory(run)'s result, not {type(traj).__name__}."
        )
    return emergence(traj.to_table(), METRIC, segments=segments, min_rise=0.0)


def _sampler():
    """devinterp's estimator, or one line naming the extra when it is not installed."""
    try:  # the optional extra llc: imported only when an LLC is estimated
        from datasets import Dataset
        from devinterp.slt.llc import llc
    except ImportError as err:
        raise IhprobeError(f"the LLC needs the optional extra llc (devinterp): {EXTRA}.") from err

    def estimate(path: Path, rows: torch.Tensor, settings: SGLDSettings) -> dict:
        model = load_hf(path)
        dataset = Dataset.from_dict({"input_ids": rows.tolist()}).with_format("torch")
        with tempfile.TemporaryDirectory() as tmp, _quiet_chains():
            result = llc(
                model,
                dataset,
                {},
                lr=settings.lr,
                n_beta=settings.beta(rows.shape[1]),
                localization=settings.localization,
                num_chains=settings.chains,
                num_draws=settings.draws,
                batch_size=settings.batch_size,
                num_init_loss_batches=settings.init_batches,
                init_seed=settings.seed,
                device="cpu",
                output_path=Path(tmp) / "samples.zarr",
            )
            return {
                "llc_chains": [float(x) for x in result.llc_per_chain.values],
                "init_loss": float(result.init_loss.values),
                "trace": result.loss_trace.values.astype(float).tolist(),
            }

    return estimate


class _quiet_chains:
    """devinterp draws one tqdm bar per chain; silence them while sampling."""

    def __enter__(self):
        import devinterp.slt.sampler as sampler  # the optional extra, as in _sampler

        self.module, self.trange = sampler, sampler.trange
        sampler.trange = lambda *a, **k: trange(*a, **{**k, "disable": True})

    def __exit__(self, *exc):
        self.module.trange = self.trange


def _run_config(run) -> dict:
    meta = run_meta(run)
    if meta is None:
        raise IhprobeError(
            f"{run} is not an ihprobe run directory (no {RUN_META}); the LLC samples the run's "
            "own data, so pass a directory written by `ihprobe train`."
        )
    return meta["config"]


def _rows(config: dict, settings: SGLDSettings) -> torch.Tensor:
    """``settings.rows`` sequences from the run's producer, drawn at steps after training."""
    producer = make_producer(
        config["producer"],
        batch_size=config["batch_size"],
        context=config["context"],
        seed=config["seed"],
        total_steps=1,
        **config.get("producer_options", {}),
    )
    per_update = config["batch_size"] * config["context"]
    first = int(config.get("steps") or math.ceil((config.get("tokens") or 0) / per_update)) + 1
    batches, have, k = [], 0, 0
    while have < settings.rows:
        tokens = producer.sample(first + k).tokens
        batches.append(tokens)
        have, k = have + len(tokens), k + 1
    return torch.cat(batches)[: settings.rows]


def _summary(result: dict) -> dict:
    chains = np.asarray(result["llc_chains"], dtype=float)
    return {
        "llc_mean": float(chains.mean()),
        "llc_std": float(chains.std()),
        "init_loss": result["init_loss"],
        "llc_chains": chains.tolist(),
    }


def _checked_result(value) -> dict:
    """A cached LLC estimate, or ValueError unless it holds finite chains, a finite initial
    loss and a rectangular ``[chain, draw]`` loss trace with one row per chain."""
    chains = [results_cache.number(x) for x in value["llc_chains"]]
    trace = results_cache.matrix(value["trace"])
    if not chains or len(trace) != len(chains):
        raise ValueError(f"{len(chains)} chains but {len(trace)} loss traces")
    return {
        "llc_chains": chains,
        "init_loss": results_cache.number(value["init_loss"]),
        "trace": trace,
    }
