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


def lack_of_fit(runs: pd.DataFrame) -> dict | None:
    """The law against a free mean per cell: the likelihood ratio of the two Tobit fits
    (censored runs at their bound) in its F form, F = (e^(LR/n) - 1) (n - g) / (g - 3) on
    (g - 3, n - g) df for n runs in g cells, which is the exact lack-of-fit F test when no run
    is censored; None while no cell has two runs (one run per cell: the free model fits every
    run exactly, nothing is left to test).

    ``runs``: columns cell, B, C, updates, censored. Returns the statistic, df, p and method.

    >>> cells = [(B, C) for B in (1, 4, 16) for C in (64, 256)]
    >>> runs = pd.DataFrame([{"cell": f"{B}-{C}", "B": B, "C": C, "censored": False,
    ...                       "updates": 1e5 / B / C**0.5 * 10 ** (0.05 * (-1) ** s)}
    ...                      for B, C in cells for s in range(2)])
    >>> fit = lack_of_fit(runs)
    >>> fit["df"], round(fit["statistic"], 6)     # the law holds exactly: no lack of fit
    ((3, 6), 0.0)
    """
    sizes = runs.groupby("cell").size()
    cells, n = list(sizes.index), len(runs)
    if sizes.max() < 2 or len(cells) <= 3:
        return None
    y = np.log10(runs.updates.to_numpy(float))
    cens = runs.censored.to_numpy(bool)
    X_law = np.column_stack(
        [np.ones(n), -np.log10(runs.B.to_numpy(float)), -np.log10(runs.C.to_numpy(float))]
    )
    X_free = np.column_stack([(runs.cell == c).to_numpy(float) for c in cells])
    _, law, _ = maximum_likelihood(y, X_law, cens)
    _, free, _ = maximum_likelihood(y, X_free, cens)
    ratio = max(2 * (free - law), 0.0)
    df = (len(cells) - X_law.shape[1], n - len(cells))
    statistic = math.expm1(ratio / n) * df[1] / df[0]
    how = (
        f"F form of the likelihood ratio of Tobit fits, law vs a mean per cell, "
        f"F({df[0]}, {df[1]}); exact without censored runs ({int(cens.sum())} here)"
    )
    return {"statistic": statistic, "df": df, "p": float(stats.f.sf(statistic, *df)), "method": how}
