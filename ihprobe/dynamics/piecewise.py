"""Fitting a learning curve: a continuous piecewise-linear fit, the noise of the curve, and
whether a rise persists.

These are the numerical pieces of :func:`~ihprobe.dynamics.changepoint.emergence` (and the
noise of :mod:`~ihprobe.dynamics.forecast`'s live likelihood); they know nothing of metrics or
runs.

>>> x = np.log10([1e3, 1e4, 1e5, 1e6, 1e7]); y = np.array([0.0, 0.0, 0.5, 1.0, 1.0])
>>> breaks, levels = piecewise_fit(x, y, 3)
>>> round(float(levels[-1]), 2)
1.0
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import pwlf
from scipy.optimize import minimize

from ihprobe.core.errors import IhprobeError

MIN_DIFFERENCES = 3  # successive differences a noise estimate needs (the median skips a jump)


def piecewise_fit(x: np.ndarray, y: np.ndarray, segments: int):
    """Breakpoints and fitted levels there of a continuous piecewise-linear least-squares fit.

    ``pwlf`` fits the lines for given breakpoints; the breakpoints are searched exhaustively
    over the checkpoints and the midpoints between them (a few hundred tiny least-squares
    problems, deterministic, unlike a stochastic global search), then polished continuously.
    """
    model = pwlf.PiecewiseLinFit(x, y)
    model.use_custom_opt(segments)
    candidates = np.unique(np.concatenate([x[1:-1], (x[1:] + x[:-1]) / 2]))
    best, best_ssr = None, np.inf
    for combo in itertools.combinations(candidates, segments - 1):
        ssr = model.fit_with_breaks_opt(np.array(combo))
        if np.isfinite(ssr) and (best is None or ssr < best_ssr - 1e-12 * max(best_ssr, 1.0)):
            best, best_ssr = np.array(combo), ssr
    if best is None:
        raise IhprobeError("the piecewise-linear fit failed on this curve (is it constant?).")
    bounds = [(x[0], x[-1])] * (segments - 1)
    polished = minimize(model.fit_with_breaks_opt, best, method="L-BFGS-B", bounds=bounds)
    if polished.success and polished.fun < best_ssr - 1e-9 * max(best_ssr, 1e-12):
        best = np.sort(polished.x)
    breaks = np.concatenate([[x[0]], best, [x[-1]]])
    model.fit_with_breaks(breaks)
    return breaks, np.asarray(model.predict(breaks))


def noise_sd(y: np.ndarray) -> float:
    """Noise sd from successive differences (their MAD, scaled to an sd), robust to the few
    large steps of a transition; 0 with fewer than 3 differences, where one jump would be half
    of the sample.

    Example:
        >>> noise_sd(np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))  # a jump is not noise
        0.0
        >>> round(noise_sd(np.array([0.0, 0.1, 0.0, 0.1, 0.0, 0.9, 1.0, 0.9])), 2)
        0.21
        >>> noise_sd(np.array([0.0, 1.0, 0.0]))
        0.0
    """
    d = np.diff(y)
    if len(d) < MIN_DIFFERENCES:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def sustained(x: np.ndarray, y: np.ndarray, start: float, end: float) -> float:
    """Median level after a segment minus the median before it: a phase change persists."""
    before, after = y[x <= start + 1e-12], y[x >= end - 1e-12]
    if not len(before) or not len(after):
        return 0.0
    return float(np.median(after) - np.median(before))


class SteepFit(NamedTuple):
    """The piecewise fit of a curve and its steepest rising segment."""

    breaks: np.ndarray
    levels: np.ndarray
    slopes: np.ndarray
    steep: int  # index of the steepest of the segments that rise at least half the most
    rise: float  # of the steep segment alone
    climb: float  # from the steep segment's start to the highest fitted level after it
    noise: float  # from successive differences or the residuals, whichever is larger


def steepest(x: np.ndarray, y: np.ndarray, segments: int) -> SteepFit:
    """The piecewise fit of a curve and its steepest segment among those that rise at least
    half as much as the most-rising one."""
    breaks, levels = piecewise_fit(x, y, segments)
    widths = np.diff(breaks)
    slopes = np.where(widths > 1e-12, np.diff(levels) / np.maximum(widths, 1e-12), 0.0)
    rises = np.diff(levels)
    steep = int(np.argmax(np.where(rises >= rises.max() / 2, slopes, -np.inf)))
    residual = y - np.interp(x, breaks, levels)
    dof = max(len(y) - 2 * segments, 1)
    noise = max(noise_sd(y), float(np.sqrt(np.sum(residual**2) / dof)))
    climb = float(levels[steep + 1 :].max() - levels[steep])
    return SteepFit(breaks, levels, slopes, steep, float(rises[steep]), climb, noise)
