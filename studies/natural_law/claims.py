"""The fit and the verdicts of the natural-text grid, declared before any run.

- **Fit:** ``log10 U = a - b log10 B - c log10 C`` by censored (Tobit) regression over every
  finished run (a run without a placed onset enters as "at least its bound"), with a Student-t
  interval on runs - 3 df; beside it the same fit with a cell-clustered sandwich as a check.
- **Claims:** [A]'s b = 0.37 and c = 0.62, each with an equivalence margin of +- 0.15:
  "agrees" only when the whole interval lies inside, "disagrees" only when it lies wholly
  outside, otherwise "inconclusive at this scale"; "pending" until ``MIN_CELLS`` cells have a
  finished run.
- **r in tokens,** as [A] reports it: the correlation of log10 observed and log10 predicted
  (by [A]'s published law) onset tokens over the runs that place their onset.
- **Lack of fit:** the law against a free mean per cell (a likelihood-ratio test), once a cell
  has two seeds.

>>> CLAIMS["b"].says, CLAIMS["c"].says, MIN_CELLS
('0.37 +- 0.15', '0.62 +- 0.15', 16)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ihprobe.dynamics.lack_of_fit import lack_of_fit
from ihprobe.dynamics.law import censored_fit
from ihprobe.dynamics.verdicts import Estimate, equal, judge

CLAIMS = {"b": equal(0.37, 0.15), "c": equal(0.62, 0.15)}
MIN_CELLS = 16  # cells with a finished run before b and c get a verdict
LAW_T = 750_000  # [A]'s published law: U = T / (B^0.37 C^0.62)


def runs_of(frame: pd.DataFrame) -> pd.DataFrame:
    """Finished runs as (cell, B, C, updates, censored, tokens)."""
    done = frame[frame.status == "done"]
    if done.empty:
        return pd.DataFrame(columns=["cell", "B", "C", "updates", "censored", "tokens"])
    return pd.DataFrame(
        {
            "cell": done.cell.to_numpy(),
            "B": done.B.astype(int).to_numpy(),
            "C": done.C.astype(int).to_numpy(),
            "updates": done.updates.astype(float).to_numpy(),
            "censored": done.censored.astype(bool).to_numpy(),
            "tokens": done.tokens.astype(float).to_numpy(),
        }
    )


def r_in_tokens(runs: pd.DataFrame) -> tuple[float, int]:
    """(r, runs) between log10 observed and [A]'s predicted onset tokens, placed runs only.

    >>> runs = pd.DataFrame({"B": [1, 4, 16], "C": [64, 256, 512], "censored": [False] * 3})
    >>> runs["tokens"] = LAW_T * runs.B**0.63 * runs.C**0.38 * np.array([1.1, 0.9, 1.0])
    >>> r, n = r_in_tokens(runs)
    >>> round(r, 3), n
    (0.998, 3)
    """
    placed = runs[~runs.censored]
    if len(placed) < 3:
        return math.nan, len(placed)
    predicted = np.log10(LAW_T * placed.B**0.63 * placed.C**0.38)
    return float(np.corrcoef(predicted, np.log10(placed.tokens))[0, 1]), len(placed)


def fits(runs: pd.DataFrame) -> dict | None:
    """The primary fit and the clustered check, or None while they cannot be made (fewer than
    4 runs, fewer than 3 placed, or a single B or C among the placed runs)."""
    placed = runs[~runs.censored]
    if len(runs) < 4 or len(placed) < 3 or placed.B.nunique() < 2 or placed.C.nunique() < 2:
        return None
    return {"model": censored_fit(runs, clustered=False), "clustered": censored_fit(runs)}


def verdicts(frame: pd.DataFrame) -> dict[str, str]:
    """The verdict on each of b and c from the CSV of record (what the README quotes).

    >>> verdicts(pd.DataFrame({"cell": ["B1-C64"], "status": ["pending"]}))
    {'b': 'pending: 0 of 16 cells', 'c': 'pending: 0 of 16 cells'}
    """
    runs = runs_of(frame)
    cells, fit = runs.cell.nunique(), fits(runs)
    if fit is None:
        said = f"pending: {cells} of {MIN_CELLS} cells" if cells < MIN_CELLS else "no fit"
        return {"b": said, "c": said}
    return {name: verdict(fit["model"][name], name, cells)[0] for name in ("b", "c")}


def verdict(estimate: Estimate, claim: str, cells: int) -> tuple[str, str]:
    """The claim's verdict, pending while fewer than ``MIN_CELLS`` cells have run.

    >>> e = Estimate(0.4, 0.3, 0.5, "Tobit", 1)
    >>> verdict(e, "b", 20)[0], verdict(e, "b", 9)[0]
    ('agrees', 'pending: 9 of 16 cells')
    >>> verdict(Estimate(0.9, 0.7, 1.1, "Tobit", 1), "b", 20)[0]
    'disagrees'
    """
    if cells < MIN_CELLS:
        return f"pending: {cells} of {MIN_CELLS} cells", estimate.text(".2f")
    return judge(estimate, CLAIMS[claim])


def fit_lines(frame: pd.DataFrame) -> list[str]:
    """The results file's fit section: b, c, their verdicts, the check, r and lack of fit."""
    runs = runs_of(frame)
    cells = runs.cell.nunique()
    fit = fits(runs)
    if fit is None:
        said = f"pending: {cells} of {MIN_CELLS} cells" if cells < MIN_CELLS else "no fit"
        return [
            f"- b and c: **{said}** (the fit needs 4 runs, 3 of them placed, over 2 B and 2 C; "
            f"{len(runs)} finished, {int((~runs.censored).sum())} placed)."
        ]
    lines = []
    for name in ("b", "c"):
        est = fit["model"][name]
        said, why = verdict(est, name, cells)
        check = fit["clustered"][name].text(".2f")
        lines.append(
            f"- {name} = {est.text('.2f')}: **{said}** (rule: [A]'s "
            f"{CLAIMS[name].says}; {why}). Cell-clustered check: {check}."
        )
    r, n = r_in_tokens(runs)
    lines.append(
        f"- r between log10 observed and [A]'s predicted onset tokens: {r:.2f} over "
        f"{n} placed runs ([A]: 0.98 on its own runs)."
    )
    lof = lack_of_fit(runs)
    lines.append(
        "- Lack of fit: not testable yet (one seed per cell: a free mean per cell fits every "
        "run exactly; a second seed in some cells makes it testable)."
        if lof is None
        else f"- Lack of fit: F = {lof['statistic']:.2f}, p = {lof['p']:.3f} ({lof['method']})."
    )
    return lines
