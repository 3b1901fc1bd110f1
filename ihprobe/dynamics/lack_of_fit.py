"""Does the law's plane fit the cells? A lack-of-fit test against a free mean per cell.

:func:`~ihprobe.dynamics.law.censored_fit` fits ``log10 U = a - b log10 B - c log10 C`` over
every run; this module asks whether the cells' means lie on that plane, or whether a mean per
cell explains the runs better than the plane does (it needs cells with two runs or more).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ihprobe.dynamics.censored import maximum_likelihood
from ihprobe.dynamics.law import law_design

DRAWS = 199  # parametric bootstrap draws behind a p-value with censored runs (p >= 1 / 200)
ALPHA = 0.05  # declared level: below it the cells lie off the plane


def lack_of_fit(runs: pd.DataFrame, *, draws: int = DRAWS, seed: int = 0) -> dict | None:
    """The law against a free mean per cell, by the likelihood ratio of the two Tobit fits
    (censored runs at their bound); None while no cell has two runs (the free model then fits
    every run exactly, nothing is left to test).

    Without censored runs p is the exact lack-of-fit F test, F = (e^(LR/n) - 1) (n - g) /
    (g - 3) on (g - 3, n - g) df for n runs in g cells. With them the F form is no longer exact
    (and has little power), so p comes from a parametric bootstrap: ``draws`` grids simulated
    from the fitted plane, each run censored at its ``budget`` (a column; without it a censored
    run's own bound, a placed run never), refitted both ways; p = (1 + draws with a ratio at
    least as large) / (draws + 1), with its Monte Carlo standard error ``p_error`` (one refit
    that converges differently on another CPU moves p by 1 / (draws + 1)). A free mean of a cell
    whose runs are all censored has no maximum (it grows without end); such a cell adds nothing
    to the free model's likelihood.

    ``runs``: columns cell, B, C, updates, censored (and optionally budget). Returns the
    statistic (F, or the ratio when bootstrapped), df, p, p_error, the verdict and the method.

    >>> cells = [(B, C) for B in (1, 4, 16) for C in (64, 256)]
    >>> runs = pd.DataFrame([{"cell": f"{B}-{C}", "B": B, "C": C, "censored": False,
    ...                       "updates": 1e5 / B / C**0.5 * 10 ** (0.05 * (-1) ** s)}
    ...                      for B, C in cells for s in range(2)])
    >>> fit = lack_of_fit(runs)
    >>> fit["df"], round(fit["statistic"], 6), fit["verdict"]     # the law holds exactly
    ((3, 6), 0.0, 'no lack of fit found')
    """
    sizes = runs.groupby("cell").size()
    cells, n = list(sizes.index), len(runs)
    if sizes.max() < 2 or len(cells) <= 3:
        return None
    y = np.log10(runs.updates.to_numpy(float))
    cens = runs.censored.to_numpy(bool)
    X_law, _, _ = law_design(runs)
    member = np.column_stack([(runs.cell == c).to_numpy(bool) for c in cells])
    df = (len(cells) - X_law.shape[1], n - len(cells))
    ratio, theta = _ratio(y, cens, X_law, member)
    if not cens.any():
        statistic = math.expm1(ratio / n) * df[1] / df[0]
        p = float(stats.f.sf(statistic, *df))
        how = f"exact lack-of-fit F({df[0]}, {df[1]}): no run censored"
    else:
        budget = _budgets(runs, y, cens)
        rng = np.random.default_rng(seed)
        mean, sigma = X_law @ theta[:-1], math.exp(theta[-1])
        larger = 0
        for _ in range(draws):
            drawn = mean + sigma * rng.standard_normal(n)
            over = drawn >= budget
            larger += _ratio(np.where(over, budget, drawn), over, X_law, member)[0] >= ratio
        statistic, p = ratio, (1 + larger) / (draws + 1)
        how = (
            f"likelihood ratio of Tobit fits, law vs a mean per cell, {int(cens.sum())} of "
            f"{n} runs censored; p by a parametric bootstrap from the law's fit, {draws} draws"
        )
    said = "the cells' means lie off the plane" if p < ALPHA else "no lack of fit found"
    found = {"statistic": statistic, "df": df, "p": p, "verdict": said, "method": how}
    return {**found, "p_error": _mc_error(p, draws, cens)}


def _mc_error(p: float, draws: int, cens: np.ndarray) -> float:
    """p's Monte Carlo standard error: none from the exact F test (no run censored)."""
    return math.sqrt(p * (1 - p) / (draws + 1)) if cens.any() else 0.0


def _ratio(y, cens, X_law, member) -> tuple[float, np.ndarray]:
    """(twice the log-likelihood ratio of a free mean per cell over the plane, the plane's
    parameters): cells with every run censored add nothing to the free model."""
    theta, law, _ = maximum_likelihood(y, X_law, cens)
    seen = member[:, [bool((~cens[m]).any()) for m in member.T]]
    rows = seen.any(axis=1)
    free = maximum_likelihood(y[rows], seen[rows].astype(float), cens[rows])[1] if rows.any() else 0
    return max(2 * (free - law), 0.0), theta


def _budgets(runs: pd.DataFrame, y: np.ndarray, cens: np.ndarray) -> np.ndarray:
    """log10 of the updates at which each run would be censored."""
    if "budget" in runs:
        return np.log10(runs.budget.to_numpy(float))
    return np.where(cens, y, np.inf)
