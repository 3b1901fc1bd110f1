"""The emergence point of induction heads in a training run (``docs/science.md``).

A metric's trajectory over checkpoints (by default the max over heads of the prefix-matching
score) is fitted against log10(tokens) with a 3-segment continuous piecewise-linear curve
(``pwlf``); the emergence point is the start of the steepest rising segment. The first checkpoint
whose value crosses a threshold (0.3 for prefix matching) is reported beside it, and both come with
the checkpoints that bracket them (all the resolution checkpoints allow); a steep segment that does
not rise clearly above its noise gives an explicit no-transition result.

>>> table = trajectory("runs/demo")                                 # doctest: +SKIP
>>> point = emergence(table)                                         # doctest: +SKIP
>>> point.transition, point.updates, (point.tokens_low, point.tokens_high)  # doctest: +SKIP
(True, 912.4, (51200, 65536))

The law that predicts the point from batch size and context is in :mod:`ihprobe.dynamics.law`; the
trajectories come from :mod:`ihprobe.dynamics.trajectories`, and one value per checkpoint from
:mod:`ihprobe.dynamics.curves`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ihprobe.core import calls, checks
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.curves import curve
from ihprobe.dynamics.piecewise import SteepFit, steepest, sustained
from ihprobe.dynamics.trajectories import trajectory
from ihprobe.io.provenance import Provenance
from ihprobe.io.runs import run_shape
from ihprobe.probes.metrics import METRIC_TABLE

log = logging.getLogger(__name__)

# Metrics that fall when induction heads form; their curves are flipped before fitting.
DECREASING = frozenset(m.name for m in METRIC_TABLE.values() if m.direction == "lower")
# Default threshold per metric (prefix matching: 0.3); others use the half-rise level of the fit.
THRESHOLDS = {m.name: m.threshold for m in METRIC_TABLE.values() if m.threshold is not None}
# The least rise of the steep segment that counts as a transition, in the metric's own units.
MIN_RISE = {m.name: m.min_rise for m in METRIC_TABLE.values() if m.min_rise}
NOISE_FACTOR = 4.0  # the steep segment must also rise this many noise sds


@dataclass(frozen=True)
class EmergencePoint:
    """When a run's metric rose: the change point of the fit and the threshold crossing.

    ``tokens`` is the start of the steep segment (interpolated between checkpoints), ``updates``
    the optimiser updates there, and ``step`` the first checkpoint at or after it (one you can
    load). ``tokens_low``/``tokens_high`` (``updates_low``/``updates_high``): the checkpoints that
    bracket it. When ``transition`` is False, ``reason`` says why and the point fields are None.

    Example:
        >>> tokens = [0] + [2**k * 1000 for k in range(12)]
        >>> t = pd.DataFrame({"step": [x // 1000 for x in tokens], "tokens": tokens,
        ...     "metric": "prefix_matching", "value": [0.02] * 7 + [0.8] * 6})
        >>> point = emergence(t)
        >>> point.transition, point.tokens_low, point.tokens_high
        (True, 32000.0, 64000.0)
    """

    metric: str
    reduce: str | tuple[int, int]
    transition: bool
    tokens: float | None = None
    updates: float | None = None
    step: int | None = None
    tokens_low: float | None = None
    tokens_high: float | None = None
    updates_low: float | None = None
    updates_high: float | None = None
    threshold: float | None = None
    threshold_step: int | None = None
    threshold_tokens: float | None = None
    rise: float = 0.0
    noise: float = 0.0
    breaks: tuple[float, ...] = ()  # of the fit, in tokens (in steps when tokens are unknown)
    slopes: tuple[float, ...] = ()
    reason: str = ""
    rise_at_last: bool = False  # only the last checkpoint is past the steep segment's half-rise
    model: str | None = None
    batch_size: int | None = None
    context: int | None = None
    curve: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)

    @property
    def at_edge(self) -> bool:
        """The run ended inside its rise, so the point is a lower bound (train on to place it): its
        steep segment starts in the last checkpoint interval, or only the last checkpoint is past
        the segment's half-rise (the fit can put such a rise's start an interval early).

        >>> EmergencePoint("prefix_matching", "max", True, updates=90, updates_high=100,
        ...                curve=pd.DataFrame({"step": [0, 50, 100]})).at_edge
        True
        """
        if not self.transition or self.curve.empty or self.updates_high is None:
            return False
        return self.rise_at_last or bool(self.updates_high >= self.curve["step"].max())

    @property
    def provenance(self) -> Provenance:
        """The run the point was found in (a run, so no revision, step or tokens of its own)."""
        return Provenance(str(self.model))

    def to_dict(self) -> dict:
        """Every field but the curve, JSON-ready."""
        out = {k: v for k, v in asdict(self).items() if k != "curve"}
        out["reduce"] = list(self.reduce) if isinstance(self.reduce, tuple) else self.reduce
        return {k: _plain(v) for k, v in out.items()}

    def to_frame(self) -> pd.DataFrame:
        """One row per point, so that the points of many runs concatenate."""
        return pd.DataFrame([self.to_dict()])


def _plain(value):
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ----------------------------------------------------------------------------- runs


def run_emergence(
    run_dir,
    metric: str = "prefix_matching",
    reduce: str | tuple[int, int] = "max",
    threshold: float | None = None,
    *,
    cache=True,
    progress: bool = False,
    **scan_kwargs,
) -> EmergencePoint:
    """The emergence point of one run directory: its trajectory, then :func:`emergence`,
    with the run's batch size and context filled in for :func:`~ihprobe.dynamics.law.fit_law`.

    Example:
        >>> point = run_emergence("runs/B8-C64")                         # doctest: +SKIP
        >>> point.updates, point.batch_size, point.context               # doctest: +SKIP
        (912.4, 8, 64)
    """
    table = trajectory(run_dir, [metric], cache=cache, progress=progress, **scan_kwargs)
    batch_size, context = run_shape(run_dir)
    point = emergence(table, metric, reduce, threshold, batch_size=batch_size, context=context)
    return dataclasses.replace(point, model=str(run_dir))


# ----------------------------------------------------------------------------- the point


def emergence(
    table: pd.DataFrame,
    metric: str = "prefix_matching",
    reduce: str | tuple[int, int] = "max",
    threshold: float | None = None,
    *,
    segments: int = 3,
    min_rise: float | None = None,
    batch_size: int | None = None,
    context: int | None = None,
    include_duplicates: bool = False,
) -> EmergencePoint:
    """Find the emergence point of ``metric`` in a trajectory table.

    Args:
        table: long table from :func:`trajectory` (columns ``step, tokens, metric, value`` and,
            for per-head metrics, ``layer, head``) of one run.
        metric: any scan metric; falling metrics (losses, ranks, ICL score) are handled by
            flipping their sign before the fit.
        reduce: how heads become one value per checkpoint: ``"max"``, ``"mean"``, ``"min"``
            or one ``(layer, head)``.
        threshold: the crossing level; default the metric table's (0.3 for prefix matching and
            the snippet attention scores), else the level halfway up the fitted steep segment.
        segments: pieces of the piecewise-linear fit against log10(tokens).
        min_rise: least rise, from the start of the steep segment to the highest fitted level
            after it, that counts as a transition (default per metric: 0.1 for PS, AR
            accuracy, LA, forward induction, backward-copy accuracy; 0 otherwise); a rise that
            goes on, slower, past the steep segment counts whole. The change must also
            persist: the median of the checkpoints after the steep segment must exceed the
            median before it by 4 noise sds (noise from checkpoint-to-checkpoint differences
            and from the fit's residuals, whichever is larger).
        batch_size, context: the run's B and C, for :func:`fit_law`; they also turn tokens into
            updates when the table has no steps.
        include_duplicates: fit checkpoints whose weights repeat an earlier checkpoint's too
            (``duplicate_of``; published series hold such copies). Left out by default: a
            copy is not a measurement of its step. The point's ``curve`` keeps them.

    (Over 60 lines only by these argument notes; the fit and its checks are helpers.)

    Example:
        >>> tokens = [0] + [2**k * 1000 for k in range(12)]
        >>> ps = [0.02] * 7 + [0.8] * 6                  # PS jumps between 32k and 64k tokens
        >>> t = pd.DataFrame({"step": [x // 1000 for x in tokens], "tokens": tokens,
        ...     "metric": "prefix_matching", "value": ps})
        >>> p = emergence(t)
        >>> p.transition, p.tokens_low, p.tokens_high, p.threshold_tokens
        (True, 32000.0, 64000.0, 64000.0)
    """
    calls.arguments(
        segments=segments,
        threshold=threshold,
        min_rise=min_rise,
        batch_size=batch_size,
        context=context,
    )
    full, data, axis = _measured(table, metric, reduce, include_duplicates, segments)
    model = str(table["model"].iloc[0]) if "model" in table and len(table) else None
    sign = -1.0 if metric in DECREASING else 1.0
    base = {"metric": metric, "reduce": reduce, "model": model}
    base.update(batch_size=batch_size, context=context, curve=full)
    fit_rows = data[data[axis] > 0]
    x, y = np.log10(_floats(fit_rows[axis])), sign * _floats(fit_rows["value"])
    fit = steepest(x, y, segments)
    floor = MIN_RISE.get(metric, 0.0) if min_rise is None else min_rise
    base.update(
        rise=fit.rise,
        noise=fit.noise,
        breaks=tuple(float(10**b) for b in fit.breaks),
        slopes=tuple(float(s) for s in fit.slopes),
    )
    reason = _no_transition(metric, sign, fit, x, y, floor)
    half = float(fit.levels[fit.steep] + fit.levels[fit.steep + 1]) / 2  # of the steep segment
    if threshold is None:
        threshold = THRESHOLDS.get(metric, None if reason else sign * half)
    crossing = _first_crossing(data, threshold, sign) if threshold is not None else None
    base.update(
        threshold=threshold,
        threshold_step=_int(crossing["step"]) if crossing is not None else None,
        threshold_tokens=_float(crossing["tokens"]) if crossing is not None else None,
    )
    if reason:
        return EmergencePoint(transition=False, reason=reason, **base)
    start = float(10 ** fit.breaks[fit.steep])
    last = bool(np.argmax(y >= half) == len(y) - 1)  # only the last checkpoint is past half
    located = _locate(data, axis, start, batch_size, context)
    return EmergencePoint(transition=True, rise_at_last=last, **base, **located)


def _measured(table, metric: str, reduce, include_duplicates: bool, segments: int):
    """``(curve, the checkpoints fitted, their axis)``, or one line on what the table lacks."""
    if not isinstance(table, pd.DataFrame):
        raise IhprobeError(
            f"emergence takes a trajectory table, not a {type(table).__name__}: pass "
            "ihprobe.trajectory(run_dir, ['prefix_matching']) (or read a trajectory CSV)."
        )
    full = curve(table, metric, reduce)
    checks.matrix(f"the table's {metric} values", full["value"].tolist())
    data = full if include_duplicates else full[~full["duplicate"]].reset_index(drop=True)
    axis = "tokens" if data["tokens"].notna().all() else "step"
    fitted = int((data[axis] > 0).sum())
    if fitted < 2 * segments:
        raise IhprobeError(
            f"{fitted} checkpoint(s) past step 0 are too few for a {segments}-segment fit "
            f"(need {2 * segments}); save more checkpoints (TrainConfig.n_checkpoints) or pass "
            "segments=2."
        )
    return full, data, axis


def _no_transition(metric: str, sign: float, fit: SteepFit, x, y, floor: float) -> str:
    """Why the fit shows no transition (never rises, rises too little, does not stay), or ""."""
    if fit.rise <= 1e-9 * max(1.0, float(np.abs(y).max())):  # float noise of a flat fit
        return f"{metric} never rises" if sign > 0 else f"{metric} never falls"
    if fit.climb < floor:  # a rise that goes on past the steep segment counts whole
        return (
            f"{metric} changes by {fit.climb:.3g} from the start of its steepest segment "
            f"< min_rise={floor:g}"
        )
    start, end = fit.breaks[fit.steep], fit.breaks[fit.steep + 1]
    if sustained(x, y, start, end) < NOISE_FACTOR * fit.noise:
        return (
            f"{metric} does not stay changed: the levels before and after the steepest segment "
            f"differ by less than {NOISE_FACTOR:g} noise sds ({fit.noise:.3g})"
        )
    return ""


def _first_crossing(data: pd.DataFrame, threshold: float, sign: float):
    hit = data[sign * data["value"] >= sign * threshold]
    return None if hit.empty else hit.iloc[0]


def _locate(data: pd.DataFrame, axis: str, at: float, batch_size, context) -> dict:
    """Tokens, updates and the bracketing checkpoints of a point at ``at`` on ``axis``."""
    positions = _floats(data[axis])
    nearest = positions[np.argmin(np.abs(positions - at))]
    at = nearest if abs(nearest - at) <= 1e-9 * at else at  # undo 10**log10 rounding
    below, above = data[positions <= at], data[positions > at]
    low = below.iloc[-1] if len(below) else data.iloc[0]
    high = above.iloc[0] if len(above) else data.iloc[-1]
    per_update = batch_size * context if batch_size and context else None
    steps = _floats(data["step"])
    if axis == "tokens":
        tokens = at
        known = ~np.isnan(steps)
        updates = (
            float(np.interp(at, positions[known], steps[known]))
            if known.sum() >= 2
            else (at / per_update if per_update else None)
        )
    else:
        updates = at
        tokens = at * per_update if per_update else None
    first = low if len(below) and float(low[axis]) == at else high
    return {
        "tokens": _float(tokens),
        "updates": _float(updates),
        "step": _int(first["step"]),
        "tokens_low": _float(low["tokens"]),
        "tokens_high": _float(high["tokens"]),
        "updates_low": _float(low["step"]),
        "updates_high": _float(high["step"]),
    }


def _floats(column: pd.Series) -> np.ndarray:
    """A column as float64, missing values (NaN, ``<NA>`` of nullable ints) as NaN."""
    return column.astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def _int(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _float(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
