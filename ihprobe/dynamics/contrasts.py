"""Cells compared by a Tobit fit with a term per cell, censored runs (no emergence within their
budget) kept at their bound: :func:`censored_contrast` (a weighted sum of cell means) and
:func:`censored_ratio` (one cell over another, or a bound where one cell is all censored).

``small_sample`` (the default) scales the covariance by n / (n - cells), so that without
censoring the interval is the exact pooled t-interval (the ML variance, RSS / n, makes it too
narrow: at 5 and 5 runs it covers 0.93):

>>> a, b = np.array([3.0, 3.1, 2.9]), np.array([3.2, 3.3, 3.1])   # log10 updates
>>> runs = pd.DataFrame({"cell": ["a"] * 3 + ["b"] * 3, "updates": 10 ** np.r_[a, b],
...                      "censored": False})
>>> exact = censored_ratio(runs, "b", "a")
>>> pooled = stats.ttest_ind(b, a).confidence_interval()
>>> bool(np.isclose(exact.low, pooled.low) and np.isclose(exact.high, pooled.high))
True
>>> plain = censored_ratio(runs, "b", "a", small_sample=False)
>>> bool(plain.high - plain.value < exact.high - exact.value)
True
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ihprobe.dynamics.censored import tobit
from ihprobe.dynamics.verdicts import LEVEL, MIN_SEEDS, Estimate, t_mean


def censored_ratio(
    runs: pd.DataFrame, cell: str, base: str, *, needs: int = MIN_SEEDS, small_sample: bool = True
) -> Estimate:
    """log10 of ``cell``'s emergence over ``base``'s (geometric means) by a Tobit fit with a
    cell indicator, censored runs at their bound; model-based interval, df = runs - 2.

    ``runs``: columns cell, updates, censored.
    """
    rows = runs[runs.cell.isin([cell, base])]
    if rows.censored.all():  # no run of either cell placed: nothing to compare
        n_cell, n_base = (int((rows.cell == c).sum()) for c in (cell, base))
        how = f"every run of {cell} and {base} censored, {n_cell} and {n_base} seeds"
        return Estimate(math.nan, math.nan, math.nan, how, min(n_cell, n_base), needs, True)
    if any(rows[rows.cell == c].censored.all() for c in (cell, base)):
        return _censored_bound(rows, cell, base, needs, small_sample)  # a bound only
    return censored_contrast(rows, [cell, base], [1, -1], needs=needs, small_sample=small_sample)


def censored_contrast(
    runs: pd.DataFrame, cells, weights, *, needs: int = MIN_SEEDS, small_sample: bool = True
) -> Estimate:
    """sum_i w_i (mean log10 updates of ``cells[i]``): Tobit with a term per cell, censored runs
    at their bound, model-based interval, df = runs - cells. ``runs``: cell, updates, censored."""
    rows = runs[runs.cell.isin(cells)]
    X = np.column_stack([(rows.cell == c).to_numpy(float) for c in cells])
    y = np.log10(rows.updates.to_numpy(float))
    beta, cov, df, how = tobit(y, X, rows.censored, small_sample=small_sample)
    scaled = small_sample and df >= 1
    counts = rows.groupby("cell").size().reindex(cells).fillna(0).astype(int).tolist()
    listed = ", ".join(map(str, counts[:-1])) + " and " * (len(counts) > 1) + str(counts[-1])
    how += f" with cell terms, {listed} seeds, {int(rows.censored.sum())} censored, t df {df}"
    how += ", variance x n / (n - cells)" if scaled else ""
    w = np.asarray(weights, float)
    value, se = float(w @ beta), math.sqrt(w @ cov @ w)
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * se if df >= 1 else np.nan
    return Estimate(value, value - half, value + half, how, min(counts), needs, log10=True)


def _censored_bound(
    rows: pd.DataFrame, cell: str, base: str, needs: int, small_sample: bool
) -> Estimate:
    """One cell all censored: log10 of its least bound over the other's upper end of mean log10
    updates (t, or Tobit with censored runs): the ratio is at least (at most, ``base``) that."""
    late = cell if rows[rows.cell == cell].censored.all() else base
    early = rows[rows.cell == (base if late == cell else cell)]
    name, censored = early.cell.iloc[0], early.censored.any()
    if censored:
        mean = censored_contrast(early, [name], [1], small_sample=small_sample)
    else:
        mean = t_mean(np.log10(early.updates))
    edge = float(np.log10(rows[rows.cell == late].updates.min()) - mean.high)
    n_cell, n_base = (int((rows.cell == c).sum()) for c in (cell, base))
    how = (
        f"every run of {late} censored: its least bound over the upper end of {name} "
        f"({mean.method}), {n_cell} and {n_base} seeds"
    )
    sign, seeds = (1 if late == cell else -1), min(n_cell, n_base)
    return Estimate(sign * edge, *sorted([sign * edge, sign * math.inf]), how, seeds, needs, True)
