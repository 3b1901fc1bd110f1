"""The law of Aoyama et al. that predicts when induction heads emerge, and its refit.

The number of optimiser updates ``U`` at the emergence point does not depend on model size; it
depends on the batch size ``B`` (sequences per update) and the context ``C`` as a power law::

    U = T / (B**b * C**c)            tokens N = U * B * C

``law="fitted"`` is [A]'s fit (T = 750,000, b = 0.37, c = 0.62). ``law="sqrt"`` is the other
published form ``N = 10**5.7 * sqrt(B * C)`` tokens, which is the same power law with
T = 10**5.7 and b = c = 0.5. Both were fitted to [A]'s optimiser settings, so :func:`fit_law`
refits T and the exponents from a user's own runs by log-linear least squares, or, when some
runs did not place their emergence point (no transition, or a rise cut off by the end of
training), by a censored (Tobit) fit that keeps each of them as "at least" its bound.

>>> round(predict_emergence(16, 64).updates, -2)
20400.0
>>> fit = fit_law([(4, 64, 34_000), (16, 64, 20_000), (16, 128, 13_000), (4, 32, 52_000)])
>>> round(fit.b, 2), round(fit.c, 2)
(0.38, 0.62)
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.censored import tobit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Law:
    """``U = T / (B**b * C**c)`` updates at the emergence point."""

    T: float
    b: float
    c: float
    name: str = "custom"

    def updates(self, batch_size: float, context: float) -> float:
        return self.T / (batch_size**self.b * context**self.c)


LAWS: dict[str, Law] = {
    "fitted": Law(T=750_000.0, b=0.37, c=0.62, name="fitted"),  # [A]: U = 750k / (B^.37 C^.62)
    "sqrt": Law(T=10**5.7, b=0.5, c=0.5, name="sqrt"),  # [A]: N = 10^5.7 sqrt(B C) tokens
}


@dataclass(frozen=True)
class Prediction:
    """When the law expects induction heads: optimiser updates and training tokens."""

    updates: float
    tokens: float
    law: Law
    batch_size: int
    context: int

    def to_dict(self) -> dict:
        shape = {key: getattr(self, key) for key in ("batch_size", "context", "updates", "tokens")}
        return {**shape, "law": self.law.name, "T": self.law.T, "b": self.law.b, "c": self.law.c}


def get_law(law: str | Law, *, T: float | None = None, b=None, c=None) -> Law:
    """A law by name (``"fitted"``, ``"sqrt"``) or as given, with constants overridden."""
    if isinstance(law, str):
        if law not in LAWS:
            raise IhprobeError(f"unknown law {law!r}; choose one of {sorted(LAWS)}.")
        law = LAWS[law]
    if not isinstance(law, Law):
        law = law.law  # a LawFit
    overrides = {k: float(v) for k, v in {"T": T, "b": b, "c": c}.items() if v is not None}
    bad = {k: v for k, v in overrides.items() if not math.isfinite(v) or (k == "T" and v <= 0)}
    if bad:
        raise IhprobeError(f"law constants must be finite and T positive (got {bad}).")
    if overrides:
        name = f"{law.name} (" + ", ".join(f"{k}={v:g}" for k, v in overrides.items()) + ")"
        law = Law(**{"T": law.T, "b": law.b, "c": law.c, **overrides, "name": name})
    return law


def predict_emergence(
    batch_size: int,
    context: int,
    law: str | Law = "fitted",
    *,
    T: float | None = None,
    b: float | None = None,
    c: float | None = None,
) -> Prediction:
    """Predict the updates and tokens at which induction heads emerge.

    Args:
        batch_size: sequences per optimiser update, B.
        context: tokens per sequence, C.
        law: ``"fitted"`` (``U = 750000 / (B^0.37 C^0.62)``), ``"sqrt"``
            (``N = 10^5.7 sqrt(B C)`` tokens), a :class:`Law`, or a :class:`LawFit`.
        T, b, c: override the law's constant and exponents.

    Example:
        >>> p = predict_emergence(4, 64)                 # [A]'s synthetic setting
        >>> round(p.updates, -3), round(p.tokens / 1e6, 1)
        (34000.0, 8.7)
    """
    shape_ok = all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (batch_size, context)
    )
    if not shape_ok or batch_size < 1 or context < 1:
        raise IhprobeError(
            f"batch size and context must be positive integers (got B={batch_size!r}, "
            f"C={context!r})."
        )
    chosen = get_law(law, T=T, b=b, c=c)
    try:  # an extreme B, C or exponent: one line, never a raw OverflowError or ZeroDivisionError
        updates = chosen.updates(batch_size, context)
        tokens = updates * batch_size * context
    except (OverflowError, ZeroDivisionError) as err:
        updates = tokens = math.nan
        why = err
    else:
        why = None
    if why is not None or not (math.isfinite(updates) and math.isfinite(tokens) and updates > 0):
        raise IhprobeError(
            f"{chosen.name} at B={batch_size}, C={context} gives no finite positive number of "
            f"updates ({why or updates}): the batch size, context or exponents are too extreme."
        )
    return Prediction(updates, tokens, chosen, batch_size, context)


@dataclass(frozen=True)
class LawFit:
    """``log U = log T - b log B - c log C`` fitted by least squares to measured points.

    ``r`` is the Pearson correlation of predicted and measured log updates; ``residuals`` are
    ``log10(measured / predicted)`` per point; ``stderr`` holds standard errors of ``log10 T``,
    ``b`` and ``c`` (NaN for fixed parameters and for exact fits, which leave no residual).
    ``censored`` counts the points known only as a lower bound (``points.censored``; their
    residual is the bound's): with any, the fit is Tobit maximum likelihood.
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
        return {"batch_size": batch_size, "context": context, "updates": updates,
                "censored": bool(censored and censored[0])}  # fmt: skip
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
