"""A live forecast of the emergence point: the law's prediction, sharpened by the run so far.

The forecast is a posterior over ``t* = log10(updates)`` at the emergence point (the onset of
the rise of max prefix matching, as :func:`ihprobe.emergence` defines it), on a grid:

* the prior is the law's prediction (:mod:`ihprobe.dynamics.prior`: the published law, or
  refitted on earlier runs) with a spread in log10 updates;
* the likelihood of the live probes ``(step, max PS)`` given ``t*`` is a ramp: max PS sits at a
  base level up to ``t*``, then climbs by ``rise >= RAMP_MIN_RISE`` over ``width`` decades of
  updates and stays up; base and rise are fitted per grid point, the width is averaged over
  :data:`WIDTHS`, and the noise is Gaussian with the run's own checkpoint-to-checkpoint sd
  (at least :data:`NOISE_FLOOR`);
* once the run crosses the PS threshold and the change-point fit confirms a transition, the
  forecast collapses to the detected point and its bracketing checkpoints.

Before any probe (or with only the untrained model's) the forecast is exactly the law's value.
``docs/forecast.md`` explains the choices.

>>> prior = law_prior(32, 64)
>>> f = forecast_emergence([], prior)
>>> round(f.updates), f.detected
(15788, False)
>>> records = [{"step": s, "max_prefix_matching": 0.05} for s in range(0, 700, 100)]
>>> forecast_emergence(records, prior).updates_low > 600   # flat so far: not before 600
True
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import norm

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import THRESHOLDS, EmergencePoint, emergence
from ihprobe.dynamics.piecewise import noise_sd
from ihprobe.dynamics.prior import Prior, law_prior  # noqa: F401 - the examples' prior
from ihprobe.io.runs import PROBES, RUN_META, RunDir, run_meta

log = logging.getLogger(__name__)

FORECAST = "forecast.jsonl"  # one line per live probe in the run directory
METRIC = "prefix_matching"
VALUE = "max_prefix_matching"  # the live probes' field (probes.jsonl)
RAMP_MIN_RISE = 0.2  # max PS climbs at least this much when heads form (chance ~0.1 -> 0.3)
WIDTHS = (0.05, 0.1, 0.2, 0.4)  # decades of updates the rise may take, averaged over
NOISE_FLOOR = 0.03  # least sd of max PS between checkpoints (probes on 20 rows are noisy)
GRID_POINTS = 801
LEVEL = 0.8  # central probability of the interval


@dataclass(frozen=True)
class Forecast:
    """The predicted emergence point after ``at_step`` updates, with a central interval.

    ``source`` is ``"law"`` (no information from the run yet), ``"posterior"`` (law and run
    combined) or ``"detected"`` (the run has emerged; the interval is the bracketing
    checkpoints).

    Example:
        >>> rows = [{"step": s, "max_prefix_matching": 0.05} for s in (0, 100, 200)]
        >>> f = forecast_emergence(rows, law_prior(32, 64))
        >>> f.at_step, f.updates_low <= f.updates <= f.updates_high
        (200, True)
    """

    at_step: int
    updates: float
    updates_low: float
    updates_high: float
    level: float
    source: str
    batch_size: int
    context: int
    max_ps: float | None = None

    @property
    def detected(self) -> bool:
        return self.source == "detected"

    @property
    def tokens(self) -> float:
        return self.updates * self.batch_size * self.context

    def covers(self, updates: float) -> bool:
        return self.updates_low <= updates <= self.updates_high

    def to_dict(self) -> dict:
        """One line of ``forecast.jsonl``: the fields plus tokens of the run and the forecast."""
        per_update = self.batch_size * self.context
        out = asdict(self)
        out.update(
            at_tokens=self.at_step * per_update,
            tokens=self.tokens,
            tokens_low=self.updates_low * per_update,
            tokens_high=self.updates_high * per_update,
            detected=self.detected,
        )
        return out

    def postfix(self) -> str:
        """Short text for a progress bar, e.g. ``"1.2k upd (0.8k-2.0k)"``."""
        if self.detected:
            return f"emerged ~{_short(self.updates)} upd"
        return (
            f"{_short(self.updates)} upd ({_short(self.updates_low)}-{_short(self.updates_high)})"
        )


def _short(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


# ----------------------------------------------------------------------------- the update


def forecast_emergence(
    records: Sequence[dict], prior: Prior, *, level: float = LEVEL, threshold: float | None = None
) -> Forecast:
    """The forecast from the live probes so far (``probes.jsonl`` records: ``step`` and
    ``max_prefix_matching``) and the law's prior.

    Example:
        >>> prior = law_prior(32, 64, spread=0.3)
        >>> forecast_emergence([{"step": 0, "max_prefix_matching": 0.1}], prior).source
        'law'
    """
    checks.sequence("records", records)
    if not isinstance(prior, Prior):
        raise IhprobeError(f"prior must be law_prior(...)'s result (got {type(prior).__name__}).")
    if threshold is not None:
        checks.real("threshold", threshold)
    if not 0 < level < 1:
        raise IhprobeError(f"level={level} is the interval's probability: pass a value in (0, 1).")
    steps = np.array([float(r["step"]) for r in records])
    values = np.array([float(r[VALUE]) for r in records])
    at = int(steps.max()) if len(steps) else 0
    last = float(values[np.argmax(steps)]) if len(steps) else None
    common = {
        "at_step": at,
        "level": level,
        "batch_size": prior.batch_size,
        "context": prior.context,
        "max_ps": last,
    }
    point = detect(records, prior, threshold)
    if point is not None:
        return Forecast(
            updates=point.updates,
            updates_low=point.updates_low,
            updates_high=point.updates_high,
            source="detected",
            **common,
        )
    mu = math.log10(prior.updates)
    loglik = _log_likelihood(_grid(mu, prior.spread, steps), steps, values)
    if loglik is None:  # nothing past step 0: the data cannot move the law
        z = norm.ppf(0.5 + level / 2) * prior.spread
        return Forecast(
            updates=prior.updates,
            updates_low=10 ** (mu - z),
            updates_high=10 ** (mu + z),
            source="law",
            **common,
        )
    grid, loglik = loglik
    logpost = norm.logpdf(grid, mu, prior.spread) + loglik
    weights = np.exp(logpost - logsumexp(logpost))
    low, mid, high = _quantiles(grid, weights, (0.5 - level / 2, 0.5, 0.5 + level / 2))
    return Forecast(
        updates=10**mid, updates_low=10**low, updates_high=10**high, source="posterior", **common
    )


def forecast_records(records: Sequence[dict], prior: Prior, **kwargs) -> list[Forecast]:
    """Replay a run's probes: the forecast made after each record, from the records up to it.

    Example:
        >>> rows = [{"step": s, "max_prefix_matching": 0.05} for s in (0, 100, 200)]
        >>> [f.at_step for f in forecast_records(rows, law_prior(32, 64))]
        [0, 100, 200]
    """
    ordered = sorted(records, key=lambda r: r["step"])
    return [forecast_emergence(ordered[: i + 1], prior, **kwargs) for i in range(len(ordered))]


def detect(
    records: Sequence[dict], prior: Prior, threshold: float | None = None
) -> EmergencePoint | None:
    """The emergence point once max PS has crossed ``threshold`` (0.3) and the change-point fit
    of the records so far confirms a transition; None before that."""
    threshold = THRESHOLDS[METRIC] if threshold is None else threshold
    if not any(float(r[VALUE]) >= threshold for r in records):
        return None
    per_update = prior.batch_size * prior.context
    table = pd.DataFrame(
        {
            "step": [int(r["step"]) for r in records],
            "tokens": [int(r["step"]) * per_update for r in records],
            "metric": METRIC,
            "value": [float(r[VALUE]) for r in records],
        }
    )
    past_zero = int((table["step"] > 0).sum())
    if past_zero < 4:
        return None  # too few checkpoints to tell a transition from noise
    segments = 3 if past_zero >= 6 else 2
    point = emergence(
        table,
        METRIC,
        threshold=threshold,
        segments=segments,
        batch_size=prior.batch_size,
        context=prior.context,
    )
    return point if point.transition else None


def _grid(mu: float, spread: float, steps: np.ndarray) -> np.ndarray:
    """log10 updates from well below the prior and the first checkpoint to well above both."""
    seen = np.log10(steps[steps > 0]) if (steps > 0).any() else np.array([mu])
    low = min(mu - 5 * spread, seen.min() - 1)
    high = max(mu + 5 * spread, seen.max() + 1)
    return np.linspace(low, high, GRID_POINTS)


def _log_likelihood(grid: np.ndarray, steps: np.ndarray, values: np.ndarray):
    """``(grid, log p(values | t*))`` under the ramp model, or None when no record is past
    step 0 (every ``t*`` then explains the data equally)."""
    if not (steps > 0).any():
        return None
    x = np.where(steps > 0, np.log10(np.maximum(steps, 1)), -np.inf)
    widths = np.array(WIDTHS)
    ramp = np.clip((x[None, None, :] - grid[:, None, None]) / widths[None, :, None], 0, 1)
    sse = _least_squares(ramp, values)
    sigma = max(NOISE_FLOOR, noise_sd(values))
    loglik = logsumexp(-sse / (2 * sigma**2), axis=1) - math.log(len(widths))
    return grid, loglik


def _least_squares(ramp: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sum of squared errors of ``y ~ base + rise * ramp`` with ``rise`` clipped to
    ``[RAMP_MIN_RISE, 1]``, for every ramp (last axis: the records)."""
    r_mean = ramp.mean(-1, keepdims=True)
    y_mean = y.mean()
    var = ((ramp - r_mean) ** 2).sum(-1)
    cov = ((ramp - r_mean) * (y - y_mean)).sum(-1)
    slope = np.divide(cov, var, out=np.zeros_like(cov), where=var > 1e-12)
    rise = np.clip(slope, RAMP_MIN_RISE, 1.0)
    base = y_mean - rise * r_mean[..., 0]
    residual = y - base[..., None] - rise[..., None] * ramp
    return (residual**2).sum(-1)


def _quantiles(grid: np.ndarray, weights: np.ndarray, probs: Sequence[float]) -> list[float]:
    cdf = np.cumsum(weights)
    cdf = cdf / cdf[-1]
    return [float(np.interp(p, cdf, grid)) for p in probs]


# ----------------------------------------------------------------------------- live, in a run


def read_forecasts(run_dir: str | os.PathLike) -> list[Forecast]:
    """The forecasts a run recorded while training (``forecast.jsonl``); [] when it has none.

    Example:
        >>> read_forecasts("runs/demo")[-1].detected                    # doctest: +SKIP
        True
    """
    names = {f.name for f in fields(Forecast)}
    return [
        Forecast(**{k: v for k, v in line.items() if k in names})
        for line in RunDir(run_dir).records(FORECAST)
    ]


class LiveForecast:
    """The trainer's probe hook: after each live probe, the forecast from the run's probes so
    far goes to ``forecast.jsonl``; the first detection is also written to ``run.json``
    (``"emergence"``). ``latest`` is the newest forecast, for the progress bar.

    Example:
        >>> hook = LiveForecast("runs/x", law_prior(32, 64))              # doctest: +SKIP
        >>> train(config, on_probe=hook)                                   # doctest: +SKIP
    """

    def __init__(self, run_dir: str | os.PathLike, prior: Prior, level: float = LEVEL):
        self.run, self.prior, self.level = RunDir(run_dir), prior, level
        self.latest: Forecast | None = None

    def __call__(self, record: dict) -> None:
        records = [r for r in self.run.records(PROBES) if r["step"] <= record["step"]]
        latest = forecast_emergence(records, self.prior, level=self.level)
        line = {
            "step": latest.at_step,
            **latest.to_dict(),
            "prior_updates": self.prior.updates,
            "prior_spread": self.prior.spread,
            "law": self.prior.law,
        }
        self.run.append(FORECAST, line)
        if latest.detected and (self.latest is None or not self.latest.detected):
            self._record_detection(latest)
        self.latest = latest

    def _record_detection(self, found: Forecast) -> None:
        meta = run_meta(self.run.root)
        if meta is None:
            return
        meta["emergence"] = {
            "detected_at_step": found.at_step,
            "updates": found.updates,
            "updates_low": found.updates_low,
            "updates_high": found.updates_high,
            "tokens": found.tokens,
            "law_updates": self.prior.updates,
            "law": self.prior.law,
        }
        self.run.write_json(RUN_META, meta)
