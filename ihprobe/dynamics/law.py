"""The one fit of [A]'s emergence law ``U = T / (B^b C^c)`` (:mod:`ihprobe.dynamics.published`).

Three views of one regression of log10 U on 1, -log10 B and -log10 C:

* :func:`fit_law` on measured points (one per run): least squares, or, when some runs did not
  place their emergence point (no transition, or a rise cut off by the end of training), a
  censored (Tobit) fit that keeps each of them as "at least" its bound;
* :func:`cell_means_fit` on the cells' mean log10 U over seeds, with t-intervals on
  df = cells - parameters, and :func:`censored_fit`, Tobit over every run clustered by cell;
* :func:`censored_ratio` and :func:`censored_contrast`: cells compared by a Tobit fit with a
  term per cell (censored runs at their bound).

The last three return :class:`~ihprobe.dynamics.verdicts.Estimate` values that the claim
grammar (:mod:`ihprobe.dynamics.verdicts`) judges.

>>> round(predict_emergence(16, 64).updates, -2)
20400.0
>>> fit = fit_law([(4, 64, 34_000), (16, 64, 20_000), (16, 128, 13_000), (4, 32, 52_000)])
>>> round(fit.b, 2), round(fit.c, 2)
(0.38, 0.62)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.censored import (
    maximum_likelihood,
    profile_cut,
    profile_interval,
    simulated_coverage,
    tobit,
)
from ihprobe.dynamics.contrasts import censored_contrast, censored_ratio
from ihprobe.dynamics.published import LAWS, Law, Prediction, get_law, predict_emergence
from ihprobe.dynamics.verdicts import LEVEL, Estimate, seeds_text

__all__ = [
    "LAWS",
    "Law",
    "LawFit",
    "Prediction",
    "censored_contrast",
    "censored_fit",
    "censored_ratio",
    "cell_means_fit",
    "fit_law",
    "get_law",
    "law_design",
    "law_point",
    "maximum_likelihood",
    "predict_emergence",
    "profile_cut",
    "profile_interval",
    "simulated_coverage",
    "tobit",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LawFit:
    """``log U = log T - b log B - c log C`` fitted by least squares to measured points.

    ``r`` is the Pearson correlation of predicted and measured log updates; ``residuals`` are
    ``log10(measured / predicted)`` per point; ``stderr`` holds standard errors of ``log10 T``,
    ``b`` and ``c`` (NaN for fixed parameters and for exact fits, which leave no residual).
    ``censored`` counts the points known only as a lower bound (``points.censored``; their
    residual is the bound's): with any, the fit is Tobit maximum likelihood.

    Example:
        >>> fit = fit_law([(4, 64, 34_000), (16, 64, 20_000), (16, 128, 13_000), (4, 32, 52_000)])
        >>> round(fit.b, 2), round(fit.c, 2), len(fit.points)
        (0.38, 0.62, 4)
    """

    T: float
    b: float
    c: float
    r: float
    residuals: np.ndarray
    points: pd.DataFrame
    stderr: dict[str, float] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()
    censored: int = 0

    @property
    def law(self) -> Law:
        return Law(self.T, self.b, self.c, name="refit")

    @property
    def residual_dof(self) -> int:
        """Points minus free parameters (log10 T and each exponent not fixed); 0 is an exact
        fit, whose ``r`` of 1 says nothing.

        >>> fit_law([(8, 64, 2000), (16, 64, 1500)], c=0.62).residual_dof
        0
        """
        return len(self.points) - (3 - len(self.fixed))

    def predict(self, batch_size: int, context: int) -> Prediction:
        return predict_emergence(batch_size, context, self.law)

    def to_frame(self) -> pd.DataFrame:
        """The points with the fit's prediction and residual per point."""
        frame = self.points.copy()
        frame["predicted"] = [
            self.law.updates(b, c) for b, c in zip(frame.batch_size, frame.context, strict=True)
        ]
        frame["residual_log10"] = self.residuals
        return frame

    def to_dict(self) -> dict:
        return {
            **{key: getattr(self, key) for key in ("T", "b", "c", "r")},
            "n": len(self.points),
            "censored": self.censored,
            "stderr": self.stderr,
            "fixed": list(self.fixed),
            "residuals_log10": [float(x) for x in self.residuals],
        }


def _as_points(points) -> pd.DataFrame:
    """Normalise tuples ``(B, C, U[, censored])``, dicts, EmergencePoints or a frame into
    batch_size, context, updates, censored (``updates`` a lower bound where censored)."""
    columns = ["batch_size", "context", "updates"]
    if isinstance(points, pd.DataFrame):
        missing = set(columns) - set(points.columns)
        if missing:
            raise IhprobeError(f"the points table lacks columns {sorted(missing)}.")
        rows = points[[*columns, "censored"] if "censored" in points else columns]
        rows = rows.to_dict("records")
    else:
        rows = [law_point(p) for p in (points if isinstance(points, Iterable) else [points])]
        rows = [row for row in rows if row is not None]
    frame = pd.DataFrame(rows, columns=[*columns, "censored"])
    frame["censored"] = frame["censored"].fillna(False).astype(bool)
    bad = frame[columns].isna().any(axis=1) | (frame[columns] <= 0).any(axis=1)
    if bad.any():
        raise IhprobeError(
            f"{int(bad.sum())} point(s) lack a positive batch size, context or updates value: "
            f"{frame[bad].to_dict('records')[:3]}."
        )
    return frame.astype({c: float for c in columns}).reset_index(drop=True)


def law_point(p) -> dict | None:
    """One point as :func:`fit_law` reads it (batch_size, context, updates, censored): an
    EmergencePoint without a transition is censored at its last checkpoint, one that ended
    inside its rise (``EmergencePoint.at_edge``) at its point; None when nothing bounds it.

    >>> law_point((8, 64, 2000))
    {'batch_size': 8, 'context': 64, 'updates': 2000, 'censored': False}
    """
    if isinstance(p, dict):
        keys = ("batch_size", "context", "updates", "censored")
        return {k: p.get(k) for k in keys}
    if not hasattr(p, "updates"):  # a tuple
        batch_size, context, updates, *censored = p
        return {
            "batch_size": batch_size,
            "context": context,
            "updates": updates,
            "censored": bool(censored and censored[0]),
        }
    row = {"batch_size": p.batch_size, "context": p.context, "updates": p.updates}
    if getattr(p, "transition", True):
        return {**row, "censored": bool(getattr(p, "at_edge", False))}
    curve = getattr(p, "curve", pd.DataFrame())
    last = curve["step"].max() if "step" in curve else math.nan
    if not np.isfinite(last) or last <= 0:
        log.warning("skipping a run without a transition or known steps: %s", p.model)
        return None
    return {**row, "updates": float(last), "censored": True}


def fit_law(points, *, b: float | None = None, c: float | None = None) -> LawFit:
    """Refit ``U = T / (B^b C^c)`` to measured emergence points. (Over 60 lines: half of it is
    this docstring and the one-line messages for each kind of bad input.)

    Args:
        points: ``(batch_size, context, updates)`` tuples (a fourth item True: censored,
            ``updates`` only a lower bound), dicts or a DataFrame with those keys (and an
            optional ``censored``), or :class:`~ihprobe.dynamics.changepoint.EmergencePoint`
            objects (a run without a transition is censored at its last checkpoint, one whose
            rise starts in its last interval at its point). Any censored point: a Tobit fit.
        b, c: fix an exponent instead of fitting it (needed when all runs share one B or C).

    Example:
        >>> fit = fit_law([(4, 64, 34_000), (16, 64, 20_000), (4, 128, 22_000)])
        >>> round(fit.b, 2), round(fit.c, 2)
        (0.38, 0.63)
    """
    for name, value in (("b", b), ("c", c)):
        if value is not None:
            checks.real(name, value)
    try:
        frame = _as_points(points)
    except IhprobeError:
        raise
    except (TypeError, ValueError) as err:
        raise IhprobeError(
            "points must be (batch_size, context, updates) tuples, dicts with those keys, "
            f"EmergencePoints or a DataFrame (got {type(points).__name__})."
        ) from err
    checks.matrix("points", frame[["batch_size", "context", "updates"]].to_numpy())  # no inf
    logs = {
        "B": np.log10(frame.batch_size.to_numpy()),
        "C": np.log10(frame.context.to_numpy()),
        "U": np.log10(frame.updates.to_numpy()),
    }
    censored = frame["censored"].to_numpy(bool)
    if censored.all():
        raise IhprobeError(
            f"none of the {len(frame)} run(s) placed its emergence point (each is censored: no "
            "transition, or a rise cut off at the last checkpoint); train them further."
        )
    fixed = {"b": b, "c": c}
    target = logs["U"].copy()
    columns, names = [np.ones(len(frame))], ["log10_T"]
    for name, key in (("b", "B"), ("c", "C")):
        if fixed[name] is not None:
            target += fixed[name] * logs[key]
        else:
            if len(np.unique(logs[key][~censored])) < 2:  # a censored run only bounds it
                size = "batch size" if key == "B" else "context"
                which = "that places its emergence point " if censored.any() else ""
                raise IhprobeError(
                    f"every point {which}has the same {size}, so its exponent cannot be fitted; "
                    f"add runs with other values or fix it, e.g. fit_law(points, {name}="
                    f"{getattr(LAWS['fitted'], name)}) (the published value)."
                )
            columns.append(-logs[key])
            names.append(name)
    X = np.stack(columns, axis=1)
    if (~censored).sum() < X.shape[1]:  # censored runs bound the fit but cannot place it
        raise IhprobeError(
            f"{(~censored).sum()} placed point(s) cannot determine {X.shape[1]} parameters; "
            f"measure at least {X.shape[1]} runs that place their point, or fix an exponent."
        )
    if censored.any():
        coef, cov, *_ = tobit(target, X, censored)
    else:
        coef, *_ = np.linalg.lstsq(X, target, rcond=None)
    values = dict(zip(names, coef, strict=True))
    fitted_b = float(values.get("b", fixed["b"] if fixed["b"] is not None else np.nan))
    fitted_c = float(values.get("c", fixed["c"] if fixed["c"] is not None else np.nan))
    predicted = values["log10_T"] - fitted_b * logs["B"] - fitted_c * logs["C"]
    residuals = logs["U"] - predicted
    dof = len(frame) - X.shape[1]
    if not censored.any():
        sigma2 = float(residuals @ residuals) / dof if dof > 0 else math.nan  # exact: no error
        cov = sigma2 * np.linalg.pinv(X.T @ X)
    elif dof <= 0:
        cov = np.full_like(cov, math.nan)
    stderr = {"log10_T": math.nan, "b": math.nan, "c": math.nan}
    stderr.update({n: float(math.sqrt(max(cov[i, i], 0.0))) for i, n in enumerate(names)})
    r = float(np.corrcoef(predicted, logs["U"])[0, 1]) if np.ptp(predicted) > 0 else math.nan
    return LawFit(
        T=float(10 ** values["log10_T"]),
        b=fitted_b,
        c=fitted_c,
        r=r,
        residuals=residuals,
        points=frame,
        stderr=stderr,
        fixed=tuple(k for k, v in fixed.items() if v is not None),
        censored=int(censored.sum()),
    )


# the law over seeds and cells


def law_design(
    frame: pd.DataFrame, fixed: dict[str, float] | None = None
) -> tuple[np.ndarray, list, np.ndarray]:
    """(X, names, offset) of the law's regression on log10 U: columns 1, -log10 B, -log10 C,
    less the ``fixed`` exponents, whose terms move into the offset.

    >>> X, names, offset = law_design(pd.DataFrame({"B": [10], "C": [100]}), {"c": 0.5})
    >>> X.tolist(), names, offset.tolist()
    ([[1.0, -1.0]], ['log10T', 'b'], [-1.0])
    """
    fixed = fixed or {}
    columns = {
        "log10T": np.ones(len(frame)),
        "b": -np.log10(frame.B.to_numpy(float)),
        "c": -np.log10(frame.C.to_numpy(float)),
    }
    offset = sum((columns[k] * v for k, v in fixed.items()), np.zeros(len(frame)))
    names = [k for k in columns if k not in fixed]
    return np.column_stack([columns[k] for k in names]), names, np.asarray(offset, float)


def cell_means_fit(runs: pd.DataFrame, *, fixed: dict[str, float] | None = None) -> dict:
    """Least squares of the cells' mean log10 ``updates`` on the law's terms.

    ``runs``: columns cell, B, C, updates (placed runs only). Returns the Estimate of each free
    parameter (log10T, b, c) with a t-interval on df = cells - parameters, the residual RMS and
    the df.

    >>> cells = [(B, C) for B in (8, 16, 32) for C in (32, 64, 128)]
    >>> runs = pd.DataFrame([{"cell": f"{B}-{C}", "B": B, "C": C, "updates": 1e5 / B / C**0.5}
    ...                      for B, C in cells for _ in range(2)])
    >>> fit = cell_means_fit(runs)
    >>> round(fit["b"].value, 6), round(fit["c"].value, 6), fit["df"]
    (1.0, 0.5, 6)
    """
    fixed = fixed or {}
    logs = runs.assign(y=np.log10(runs.updates.astype(float)))
    means = logs.groupby("cell", sort=False).agg(
        B=("B", "first"), C=("C", "first"), y=("y", "mean"), n=("y", "size")
    )
    X, names, offset = law_design(means, fixed)
    y = means.y.to_numpy() - offset
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    residuals = y - X @ beta
    df = len(means) - len(names)
    seeds, how = int(means.n.min()), f"OLS on {len(means)} cell means, t df {df}"
    per_cell = seeds_text(seeds) if means.n.nunique() == 1 else f"{seeds}+ seeds"
    how += f", {per_cell} per cell"
    out = {"df": df, "rms": float(np.sqrt(np.mean(residuals**2))), "cells": len(means)}
    inverse = np.linalg.pinv(X.T @ X)
    cov = np.sum(residuals**2) / df * inverse if df >= 1 else np.full_like(inverse, np.nan)
    half = stats.t.ppf(0.5 + LEVEL / 2, max(df, 1)) * np.sqrt(np.diag(cov))
    for i, name in enumerate(names):
        out[name] = Estimate(float(beta[i]), beta[i] - half[i], beta[i] + half[i], how, seeds)
    return out


def censored_fit(
    runs: pd.DataFrame,
    *,
    fixed: dict[str, float] | None = None,
    clustered: bool = True,
    small_sample: bool = True,
) -> dict:
    """The law fitted by Tobit over every run, censored ones included at their bound.

    ``runs``: columns cell, B, C, updates (the emergence point, or the bound a censored run
    exceeds), censored (bool). ``clustered``: a sandwich covariance clustered by cell (t df =
    cells - parameters); else the model's own (t df = runs - parameters), scaled by n / df where
    ``small_sample`` (without censoring: the exact least-squares t-interval). Same keys as
    :func:`cell_means_fit` plus ``censored`` (how many runs were censored).
    """
    fixed = fixed or {}
    X, names, offset = law_design(runs, fixed)
    y = np.log10(runs.updates.to_numpy(float)) - offset
    cens = runs.censored.to_numpy(bool)
    clusters = runs.cell.to_numpy() if clustered else None
    beta, cov, df, how = tobit(y, X, cens, clusters=clusters, small_sample=small_sample)
    seeds = int(runs.groupby("cell").size().min())
    how += f", {runs.cell.nunique()} cells, {cens.sum()} of {len(runs)} runs censored, t df {df}"
    if small_sample and not clustered and df >= 1:
        how += ", variance x n / (n - k)"
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * np.sqrt(np.diag(cov)) if df >= 1 else [np.nan] * 3
    out = {"df": df, "cells": runs.cell.nunique(), "censored": int(cens.sum())}
    for i, name in enumerate(names):
        out[name] = Estimate(float(beta[i]), beta[i] - half[i], beta[i] + half[i], how, seeds)
    return out
