"""The toy law's claims and its results file: the law refitted by least squares on the cells
(one seed each) with a t-interval on df = cells - parameters (here 4 - 3 = 1), judged against
[A]'s exponents +- 0.15 by the shared claim grammar."""

from __future__ import annotations

import pandas as pd

from ihprobe.dynamics.law import cell_means_fit
from ihprobe.dynamics.verdicts import equal, judge
from ihprobe.jobs.grid import markdown

CLAIMS = {"b": equal(0.37, 0.15), "c": equal(0.62, 0.15)}  # [A]'s exponents +- 0.15


def fit_lines(table: pd.DataFrame) -> list[str]:
    """The law refitted on the width-64 runs, judged against [A]; none where a run has no
    transition (dropping it would bias the fit, and this table holds no budget to censor it at).

    >>> fit_lines(pd.DataFrame({"d_model": [64, 64], "updates": ["633", "none"]}))[0][:43]
    '1 width-64 run(s) without a transition: no '
    """
    width = table[table.d_model == 64]
    missing = int((width.updates.astype(str) == "none").sum())
    if missing:
        return [
            f"{missing} width-64 run(s) without a transition: no refit and no verdict (a fit on "
            "the others would drop them, biased early; a censored fit needs each run's budget, "
            "which this table does not hold)."
        ]
    runs = width
    runs = runs.assign(
        cell=[f"B{b}-C{c}" for b, c in zip(runs.B, runs.C, strict=True)],
        updates=runs.updates.astype(float),
    )
    fit = cell_means_fit(runs)
    said = [(k, *judge(fit[k], CLAIMS[k])) for k in ("b", "c")]
    return [
        f"Refit over the {len(runs)} width-64 runs with a transition: U = "
        f"{10 ** fit['log10T'].value:,.0f} / (B^{fit['b'].value:.2f} C^{fit['c'].value:.2f}); "
        f"95% intervals b {fit['b'].text('.2f')}, c {fit['c'].text('.2f')}.",
        "Against [A] (b = 0.37, c = 0.62, margin +- 0.15; `ihprobe/dynamics/verdicts.py`): "
        + "; ".join(f"{k} **{v}**" for k, v, _ in said)
        + ". One seed per cell and four cells leave one residual degree of freedom, so the "
        "intervals are wide; a standard error from the run-level fit ignores that.",
    ]


def render(table: pd.DataFrame, command: str) -> str:
    """The results file from the CSV of record."""
    lines = [
        "# Emergence law at toy scale (CPU)",
        "",
        f"Last command: `{command}`; rows of every run so far: `RESULTS_law.csv`.",
        "",
        "2-layer GPT-NeoX, 4 heads, vocab 128, rows of 32 random tokens repeating with a "
        "period drawn per row from 8..32; AdamW lr 3e-3 constant, grad clip 1; log-spaced "
        "checkpoints; emergence = start of the steep segment of a 3-segment fit of max PS "
        "against log tokens (probe: n=16, 50 rows). One seed per cell, measured 2026-11-29 "
        "on the shared 2-core CPU. In this data a longer context also means more repeats of "
        "the period per row, so C and repetition are confounded; the absolute numbers are "
        "~40x below [A]'s law (another task, vocabulary and learning rate); the width-128 "
        "run is one seed, not a test of size independence.",
        "",
    ]
    for checkpoints, block in table.groupby("checkpoints", sort=False):
        shown = markdown(block.drop(columns="checkpoints"))
        lines += [f"## {checkpoints} checkpoints per run", "", *shown, "", *fit_lines(block), ""]
    return "\n".join(lines)
