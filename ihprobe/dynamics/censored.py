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


def tobit(y, X, bound_censored, *, clusters=None) -> tuple[np.ndarray, np.ndarray, int, str]:
    """Right-censored normal regression (Tobit): ``y`` observed, or (where
    ``bound_censored``) known only to exceed ``y``. Returns (coefficients, their covariance,
    df, how the covariance was made): a sandwich clustered by ``clusters`` (df = clusters -
    coefficients), else the inverse observed information (df = rows - coefficients).

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
    how = "Tobit ML" if converged else "Tobit ML (optimiser did not converge)"
    hessian = _numeric_jacobian(lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0), theta)
    bread = np.linalg.pinv((hessian + hessian.T) / 2)
    if clusters is None:
        return theta[:k], bread[:k, :k], len(y) - k, how
    scores = pd.DataFrame(_tobit_scores(theta, y, X, cens)[1]).groupby(np.asarray(clusters)).sum()
    g = len(scores)
    meat = scores.to_numpy().T @ scores.to_numpy() * g / max(g - 1, 1)
    return theta[:k], (bread @ meat @ bread)[:k, :k], g - k, f"{how}, cell-clustered sandwich"


def maximum_likelihood(y, X, bound_censored) -> tuple[np.ndarray, float, bool]:
    """(coefficients and log sigma, the maximised log-likelihood, whether the optimiser
    converged) of the right-censored normal regression of :func:`tobit`.

    >>> X = np.ones((4, 1)); y = np.array([1.0, 2.0, 3.0, 4.0])
    >>> theta, loglik, ok = maximum_likelihood(y, X, np.zeros(4, bool))
    >>> round(float(theta[0]), 4), round(math.exp(theta[1]) ** 2, 4), ok   # mean, RSS / n
    (2.5, 1.25, True)
    """
    y, X, cens = np.asarray(y, float), np.asarray(X, float), np.asarray(bound_censored, bool)
    start = np.linalg.lstsq(X, y, rcond=None)[0]
    spread = np.std(y - X @ start) or 0.1
    theta0 = np.append(start, math.log(spread))
    fit = optimize.minimize(
        lambda t: -_tobit_scores(t, y, X, cens)[0].sum(),
        theta0,
        jac=lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0),
        method="BFGS",
    )
    return fit.x, float(-fit.fun), bool(fit.success)


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
