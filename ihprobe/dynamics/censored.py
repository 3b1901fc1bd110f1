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
    start = np.linalg.lstsq(X, y, rcond=None)[0]
    spread = np.std(y - X @ start) or 0.1
    theta0 = np.append(start, math.log(spread))
    fit = optimize.minimize(lambda t: -_tobit_scores(t, y, X, cens)[0].sum(), theta0,
                            jac=lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0),
                            method="BFGS")  # fmt: skip
    theta, how = fit.x, "Tobit ML" if fit.success else "Tobit ML (optimiser did not converge)"
    hessian = _numeric_jacobian(lambda t: -_tobit_scores(t, y, X, cens)[1].sum(0), theta)
    bread = np.linalg.pinv((hessian + hessian.T) / 2)
    if clusters is None:
        return theta[:k], bread[:k, :k], len(y) - k, how
    scores = pd.DataFrame(_tobit_scores(theta, y, X, cens)[1]).groupby(np.asarray(clusters)).sum()
    g = len(scores)
    meat = scores.to_numpy().T @ scores.to_numpy() * g / max(g - 1, 1)
    return theta[:k], (bread @ meat @ bread)[:k, :k], g - k, f"{how}, cell-clustered sandwich"


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
