"""The law's prediction for one run shape as a prior over ``log10(updates)`` at the emergence
point: the published law, or the law refitted on earlier runs (their emergence points, censored
ones as bounds), with a spread: the refit's residual sd, or :data:`DEFAULT_SPREAD`. The live
forecast (:mod:`ihprobe.dynamics.forecast`) starts from it.

>>> p = law_prior(32, 64)
>>> round(p.updates), p.spread, p.runs
(15788, 0.3, 0)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import EmergencePoint, run_emergence
from ihprobe.dynamics.law import Law, fit_law, get_law, law_point, predict_emergence

DEFAULT_SPREAD = 0.3  # sd of log10 updates around a law without residuals to measure it
MIN_SPREAD = 0.1  # floor for a refit's residual sd (few runs understate the scatter)


@dataclass(frozen=True)
class Prior:
    """The law's prediction for one run shape, with its spread in log10 updates.

    Example:
        >>> prior = law_prior(32, 64)
        >>> prior.batch_size, prior.context, prior.updates > 0
        (32, 64, True)
    """

    updates: float
    spread: float
    law: str
    batch_size: int
    context: int
    runs: int = 0  # earlier runs the law was refitted on


def law_prior(
    batch_size: int,
    context: int,
    law: str | Law = "fitted",
    *,
    law_from: Sequence[str | os.PathLike | EmergencePoint] = (),
    spread: float | None = None,
) -> Prior:
    """The law's prediction for ``(batch_size, context)`` as a prior over log10 updates.

    Args:
        law: the published law to start from (``"fitted"``, ``"sqrt"`` or a :class:`Law`).
        law_from: earlier runs (directories or their emergence points) to refit the law on;
            exponents of a B or C that those runs do not vary stay at ``law``'s values.
        spread: sd of log10 updates; default the refit's residual sd (at least
            :data:`MIN_SPREAD`) or :data:`DEFAULT_SPREAD` when nothing measures it.

    Example:
        >>> round(law_prior(32, 64).updates), law_prior(32, 64).spread
        (15788, 0.3)
    """
    if spread is not None:
        checks.positive("spread", spread)
    base = get_law(law)
    if not law_from:
        updates = predict_emergence(batch_size, context, base).updates
        return Prior(updates, spread or DEFAULT_SPREAD, base.name, batch_size, context)
    points = [_point(run) for run in law_from]
    rows = [row for row in map(law_point, points) if row is not None]  # censored ones as bounds
    if all(row["censored"] for row in rows):
        raise IhprobeError(
            f"none of the {len(points)} --law-from run(s) places its emergence point; pass runs "
            "that went past it, or leave --law-from out."
        )
    fit = fit_law(rows, **_fixed_exponents(rows, base))
    placed = fit.residuals[~fit.points["censored"].to_numpy(bool)]  # a bound's is not a residual
    dof = len(placed) - (3 - len(fit.fixed))
    measured = math.sqrt(float(placed @ placed) / dof) if dof > 0 else None
    if spread is None:
        spread = max(measured, MIN_SPREAD) if measured is not None else DEFAULT_SPREAD
    updates = fit.predict(batch_size, context).updates
    how = f"refit on {len(rows)} run(s)" + (f", {fit.censored} censored" if fit.censored else "")
    return Prior(updates, spread, how, batch_size, context, len(rows))


def _point(run) -> EmergencePoint:
    return run if isinstance(run, EmergencePoint) else run_emergence(run)


def _fixed_exponents(points: list[dict], base: Law) -> dict[str, float]:
    """Keep the base law's exponent for a B or C the runs (``law_point`` rows) do not vary,
    and fix exponents until they can determine what is left (batch size first, it is measured
    more often)."""
    fixed, placed = {}, [p for p in points if not p["censored"]]  # a bound cannot vary B or C
    if len({p["context"] for p in placed}) < 2:
        fixed["c"] = base.c
    if len({p["batch_size"] for p in placed}) < 2:
        fixed["b"] = base.b
    for name in ("c", "b"):
        if len(placed) < 3 - len(fixed):
            fixed.setdefault(name, getattr(base, name))
    return fixed
