"""Censored regression (Tobit): a fit that keeps runs whose emergence was not seen.

A run that ends before its induction heads form, or inside the first rise, tells only that its
emergence point lies *past* some number of updates. Dropping it biases a fitted law toward
early runs; counting it as observed at its budget does too. Tobit keeps it as "at least y":
right-censored normal maximum likelihood of log10 updates. ``fit_law`` uses it when a point is
censored, and the validation scripts' verdicts use it for censored cells.

>>> X = np.column_stack([np.ones(6), np.arange(6.0)])
>>> y = 2 + 0.5 * np.arange(6) + [0.1, -0.1] * 3
>>> beta, cov, df, how = tobit(y, X, [False] * 5 + [True])
>>> round(float(beta[1]), 2) >= 0.5, how   # the last row counts as "at least": slope no lower
(True, 'Tobit ML')
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize, stats

GRADIENT_TOLERANCE = 1e-4  # per row: a maximum BFGS stopped at for float precision is one
SIGMA_FLOOR = 1e-6  # sigma below this fraction of y's spread: the fit interpolates, no maximum


def tobit(
    y, X, bound_censored, *, clusters=None, small_sample: bool = False
) -> tuple[np.ndarray, np.ndarray, int, str]:
    """Right-censored normal regression (Tobit): ``y`` observed, or (where
    ``bound_censored``) known only to exceed ``y``. Returns (coefficients, their covariance,
    df, how the covariance was made): a sandwich clustered by ``clusters`` (df = clusters -
    coefficients), else the inverse observed information (df = rows - coefficients), scaled by
    rows / df where ``small_sample`` (without censoring: the exact least-squares t-interval).

    Without censored rows it is least squares (the variance with RSS / n):

    >>> X = np.column_stack([np.ones(6), np.arange(6.0)])
    >>> y = 2 + 0.5 * np.arange(6) + [0.1, -0.1] * 3
    >>> beta, cov, df, how = tobit(y, X, np.zeros(6, bool))
    >>> np.allclose(beta, np.linalg.lstsq(X, y, rcond=None)[0]), df
    (True, 4)
    """
    y, X, cens = np.asarray(y, float), np.asarray(X, float), np.asarray(bound_censored, bool)
    k = X.shape[1]
    theta, _, converged = maximum_likelihood(y, X, cens)
    how = (
        "Tobit ML"
        if converged
        else "Tobit ML (no maximum: sigma collapsed or the optimiser stopped short)"
    )
    bread = np.full((k + 1, k + 1), np.nan)  # no maximum: no curvature to read an interval from
    if converged:
        hessian = _numeric_jacobian(lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0), theta)
        bread = np.linalg.pinv((hessian + hessian.T) / 2)
    if clusters is None:
        df = len(y) - k
        scale = len(y) / df if small_sample and df >= 1 else 1.0
        return theta[:k], bread[:k, :k] * scale, df, how
    scores = pd.DataFrame(_tobit_scores(theta, y, X, cens)[1]).groupby(np.asarray(clusters)).sum()
    g = len(scores)
    meat = scores.to_numpy().T @ scores.to_numpy() * g / max(g - 1, 1)
    kind = "cell-clustered" if g < len(y) else "robust (one row per cluster, so not clustered)"
    return theta[:k], (bread @ meat @ bread)[:k, :k], g - k, f"{how}, {kind} sandwich"


def profile_interval(y, X, bound_censored, column: int, cut: float) -> tuple[float, float]:
    """The profile-likelihood interval of coefficient ``column`` of :func:`tobit`'s model: the
    values at which twice the log-likelihood, maximised over the other parameters, falls
    ``cut`` below its maximum (3.84 for 95% by chi-square on 1 df; a t quantile squared for a
    small-sample cut). Unlike the Wald interval it follows a lopsided likelihood, as heavy
    censoring makes one; an edge not reached within 100 of the estimate is infinite.

    >>> X = np.column_stack([np.ones(8), np.arange(8.0)])
    >>> y = 1 + 0.5 * np.arange(8) + [0.1, -0.1, 0.0, 0.05] * 2
    >>> low, high = profile_interval(y, X, np.zeros(8, bool), 1, 3.84)
    >>> slope = np.linalg.lstsq(X, y, rcond=None)[0][1]
    >>> bool(low < 0.5 < high), bool(round(high - slope, 4) == round(slope - low, 4))
    (True, True)
    """
    y, X, cens = np.asarray(y, float), np.asarray(X, float), np.asarray(bound_censored, bool)
    theta, best, _ = maximum_likelihood(y, X, cens)
    others = np.delete(X, column, axis=1)

    def short(value: float) -> float:  # how far below the cut the profile lies at value
        _, loglik, _ = maximum_likelihood(y - X[:, column] * value, others, cens)
        return cut - 2 * (best - loglik)

    edges = []
    for sign in (-1.0, 1.0):
        step, inner = 0.1, float(theta[column])
        while step <= 100 and short(inner + sign * step) > 0:
            step *= 2
        outer = inner + sign * step
        if step > 100:
            edges.append(sign * math.inf)
            continue
        edges.append(optimize.brentq(short, *sorted((inner, outer)), xtol=1e-6))
    return edges[0], edges[1]


def profile_cut(n: int, df: int, level: float = 0.95) -> float:
    """The cut for :func:`profile_interval` that makes it the exact t-interval when no row is
    censored: n log(1 + t^2 / df), since with sigma profiled out twice the log-likelihood
    ratio at a coefficient is n log(1 + T^2 / df) for its t statistic T (``n`` rows, ``df`` =
    rows - coefficients). A cut of t^2 is wider (1.4x at 5 rows and 3 df).

    >>> X = np.column_stack([np.ones(6), np.arange(6.0)])
    >>> y = 2 + 0.5 * np.arange(6) + np.array([0.1, -0.2, 0.05, 0.0, -0.1, 0.15])
    >>> low, high = profile_interval(y, X, np.zeros(6, bool), 1, profile_cut(6, 4))
    >>> fit = stats.linregress(np.arange(6.0), y)
    >>> half = stats.t.ppf(0.975, 4) * fit.stderr
    >>> bool(np.allclose([low, high], [fit.slope - half, fit.slope + half], atol=1e-5))
    True
    """
    t = stats.t.ppf(0.5 + level / 2, df)
    return n * math.log1p(t**2 / df)


def simulated_coverage(
    X,
    beta,
    sigma: float,
    bounds,
    *,
    draws: int = 200,
    seed: int = 0,
    small_sample: bool = False,
    level: float = 0.95,
) -> np.ndarray:
    """How often :func:`tobit`'s t-interval (df = rows - coefficients) covers each true
    coefficient, over ``draws`` data sets drawn at ``X`` from y = X beta + sigma z, each row
    censored at its ``bounds``; ``small_sample`` as in :func:`tobit`, as
    :func:`~ihprobe.dynamics.contrasts.censored_contrast` does. A draw whose fit reaches no
    maximum has no interval and covers nothing.

    Without censoring the scaled interval is the exact t-interval, and the unscaled one (the ML
    variance) covers P(|T_8| < t_8 sqrt(8 / 10)) = 0.927 at 10 rows:

    >>> X = np.column_stack([np.ones(10), np.repeat([0.0, 1.0], 5)])
    >>> never = np.full(10, np.inf)
    >>> exact = simulated_coverage(X, [3.0, 0.1], 0.3, never, draws=400, small_sample=True)
    >>> ml = simulated_coverage(X, [3.0, 0.1], 0.3, never, draws=400)
    >>> bool(abs(exact[1] - 0.95) < 0.035 and abs(ml[1] - 0.927) < 0.035)
    True
    """
    X, beta, bounds = np.asarray(X, float), np.asarray(beta, float), np.asarray(bounds, float)
    n, k = X.shape
    rng, hits = np.random.default_rng(seed), np.zeros(k)
    for _ in range(draws):
        drawn = X @ beta + sigma * rng.standard_normal(n)
        over = drawn >= bounds
        fitted, cov, df, _ = tobit(
            np.where(over, bounds, drawn), X, over, small_sample=small_sample
        )
        with np.errstate(invalid="ignore"):  # no maximum: a NaN interval covers nothing
            half = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(np.diag(cov))
            hits += np.abs(fitted - beta) <= half
    return hits / draws


def maximum_likelihood(y, X, bound_censored) -> tuple[np.ndarray, float, bool]:
    """(coefficients and log sigma, the maximised log-likelihood, whether it is a maximum) of
    the right-censored normal regression of :func:`tobit`. Not a maximum: the optimiser stopped
    away from a zero gradient, or sigma collapsed (the placed rows lie exactly on the fit and
    every censored bound below it, so the likelihood grows without end as sigma shrinks).

    >>> X = np.ones((4, 1)); y = np.array([1.0, 2.0, 3.0, 4.0])
    >>> theta, loglik, ok = maximum_likelihood(y, X, np.zeros(4, bool))
    >>> round(float(theta[0]), 4), round(math.exp(theta[1]) ** 2, 4), ok   # mean, RSS / n
    (2.5, 1.25, True)
    """
    y, X, cens = np.asarray(y, float), np.asarray(X, float), np.asarray(bound_censored, bool)
    start = np.linalg.lstsq(X, y, rcond=None)[0]
    spread = np.std(y - X @ start) or 0.1
    theta0 = np.append(start, math.log(spread))
    with np.errstate(all="ignore"):  # trial steps toward a collapsing sigma divide by ~0
        fit = optimize.minimize(
            lambda t: -_tobit_scores(t, y, X, cens)[0].sum(),
            theta0,
            jac=lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0),
            method="BFGS",
        )
    flat = fit.success or float(np.abs(fit.jac).max()) < GRADIENT_TOLERANCE * len(y)
    collapsed = math.exp(fit.x[-1]) < SIGMA_FLOOR * max(float(np.std(y)), 1e-12)
    return fit.x, float(-fit.fun), bool(flat and not collapsed)


def _tobit_scores(theta, y, X, cens) -> tuple[np.ndarray, np.ndarray]:
    """Per-row log-likelihood and its gradient in (coefficients, log sigma)."""
    sigma = math.exp(theta[-1])
    z = (y - X @ theta[:-1]) / sigma
    logl = np.where(cens, stats.norm.logsf(z), stats.norm.logpdf(z) - theta[-1])
    # hazard of the censored rows; capped where the optimiser's trial steps leave floats behind
    mills = np.exp(np.minimum(stats.norm.logpdf(z) - stats.norm.logsf(z), 100.0))
    d_mu = np.where(cens, mills, z) / sigma  # d logl / d (X beta)
    d_log_sigma = np.where(cens, mills * z, z**2 - 1)
    return logl, np.column_stack([X * d_mu[:, None], d_log_sigma])


def _numeric_jacobian(grad, theta, eps: float = 1e-5) -> np.ndarray:
    cols = [(grad(theta + eps * e) - grad(theta - eps * e)) / (2 * eps) for e in np.eye(len(theta))]
    return np.column_stack(cols)
