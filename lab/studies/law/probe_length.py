"""Does the probe's length move a run's emergence point? The n = C/2 re-probe of
:mod:`papers_law_halves` (issue 24): per run log10(U at n = C/2 / U at n = 16), a t-interval
over the runs placed under both probes, judged per grid against "within 1.5x either way". A
run placed under one probe only is a bound on its ratio (:func:`probe_bounds`); one already
outside the margin keeps the verdict from "agrees".

>>> probe_verdict(Estimate(0.01, -0.02, 0.04, "t", 5, 5), [("c seed 0", "at least", 2.0)])
'inconclusive at this scale'
"""

from __future__ import annotations

import pandas as pd

from ihprobe.dynamics.verdicts import (
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    MIN_SEEDS,
    Estimate,
    judge,
    same_ratio,
    t_mean,
)
from ihprobe.jobs.grid import markdown

SAME_FACTOR = 1.5  # the probe's length "does not move" the point: within 1.5x either way
SAME = same_ratio(SAME_FACTOR)


def flag(frame: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column of a results table, False where it is missing or empty."""
    return frame.get(column, pd.Series(False, index=frame.index)).fillna(False).astype(bool)


def updates_text(value) -> str:
    """``12,345`` or ``none``."""
    return "none" if value is None or pd.isna(value) else f"{float(value):,.0f}"


def probe_ratio(frame: pd.DataFrame, needs: int = MIN_SEEDS) -> tuple[Estimate, int]:
    """U at n = C/2 over U at n = 16 (geometric mean, t on log10 over runs placed under both
    probes) and how many long-probed runs were left out (:func:`probe_bounds` bounds them)."""
    probed = frame[frame.get("n_long", pd.Series(index=frame.index)).notna()]
    rows = probed[_placed(probed, "") & _placed(probed, "long_")]
    ratio = rows.long_updates.astype(float) / rows.updates.astype(float)
    return t_mean(ratio, log=True, needs=needs, unit="run"), int(len(probed) - len(rows))


def _placed(frame: pd.DataFrame, prefix: str) -> pd.Series:
    return flag(frame, f"{prefix}transition") & ~flag(frame, f"{prefix}censored")


def probe_bounds(frame: pd.DataFrame) -> list[tuple[str, str, float]]:
    """The runs placed under one probe only, as bounds on their ratio: a point not placed under
    a probe lies at or after its censored start, or after the budget when there was no
    transition, so the ratio is at least (n = C/2 unplaced) or at most (n = 16 unplaced) that.

    >>> row = {"n_long": 64, "transition": True, "censored": False, "updates": 1000.0,
    ...        "long_transition": False, "long_censored": False, "long_updates": None,
    ...        "steps": 4000, "cell": "c", "seed": 0}
    >>> probe_bounds(pd.DataFrame([row]))
    [('c seed 0', 'at least', 4.0)]
    """
    probed = frame[frame.get("n_long", pd.Series(index=frame.index)).notna()]
    out = []
    placed = zip(probed.itertuples(), _placed(probed, ""), _placed(probed, "long_"), strict=True)
    for r, short, long in placed:
        if short == long:
            continue
        later = {
            p: float(getattr(r, f"{p}updates")) if getattr(r, f"{p}transition") else float(r.steps)
            for p in ("", "long_")
        }
        side = "at least" if short else "at most"
        out.append((f"{r.cell} seed {r.seed}", side, later["long_"] / later[""]))
    return out


def probe_verdict(
    ratio: Estimate, bounds: list[tuple[str, str, float]], final: bool = False
) -> str:
    """The declared rule on the placed runs' ratio; a left-out run whose bound already lies
    outside the margin (at least 1.5x, or at most 1/1.5x) keeps it from "agrees", and one whose
    bound allows a ratio on the other side of "disagrees" (inside the margin or beyond it the
    other way) keeps it from "disagrees". ``final``: no more runs will come (a closed set), so
    too few placed runs is "inconclusive at this scale", not "pending".

    >>> later = Estimate(0.4, 0.3, 0.5, "t", 5, 5)   # log10: 2.5x [2.0x, 3.2x] later
    >>> probe_verdict(later, []), probe_verdict(later, [("c seed 1", "at most", 1.2)])
    ('disagrees', 'inconclusive at this scale')
    >>> probe_verdict(later, [("c seed 1", "at least", 1.2)])
    'disagrees'
    >>> four = Estimate(0.0, -0.01, 0.01, "t", 4, 5)   # 4 runs placed of the 5 needed
    >>> probe_verdict(four, []), probe_verdict(four, [], final=True)
    ('pending: 4 of 5 seeds', 'inconclusive at this scale')
    """
    verdict, _ = judge(ratio, SAME, final=final)
    outside = [
        b
        for _, side, b in bounds
        if (b >= SAME_FACTOR if side == "at least" else b <= 1 / SAME_FACTOR)
    ]
    if verdict == AGREES and outside:
        return INCONCLUSIVE
    later = ratio.low > 0  # a disagreeing interval lies wholly above the margin, or below it
    against = [
        b
        for _, side, b in bounds
        if (
            side == "at most" and b < SAME_FACTOR
            if later
            else side == "at least" and b > 1 / SAME_FACTOR
        )
    ]
    return INCONCLUSIVE if verdict == DISAGREES and against else verdict


def probe_table(frame: pd.DataFrame) -> pd.DataFrame:
    probed = frame[frame.get("n_long", pd.Series(index=frame.index)).notna()]
    return pd.DataFrame(
        [
            {
                "cell": r.cell,
                "seed": r.seed,
                "budget x": r.budget_factor,
                "n": int(r.n_long),
                "U at n = 16": updates_text(r.updates) + (" (censored)" if r.censored else ""),
                "U at n = C/2": updates_text(r.long_updates)
                + (" (censored)" if r.long_censored else ""),
                "ratio": f"{r.long_updates / r.updates:.2f}"
                if r.transition and r.long_transition
                else "-",
            }
            for r in probed.itertuples()
        ]
    )


def probe_lines(frame: pd.DataFrame, final: bool = False) -> list[str]:
    """The n = C/2 re-probe: per run, then the ratio and its verdict for each grid (their
    training repeats differ: the fixed-structure rows repeat with periods of 8-16 tokens);
    ``final``: a closed set of runs (:func:`probe_verdict`)."""
    table = probe_table(frame)
    if table.empty:
        return [
            "Probe length n = C/2: no run with C >= 128 or of the fixed-structure grid "
            "refitted yet.",
            "",
        ]
    probed = frame[frame.get("n_long", pd.Series(index=frame.index)).notna()]
    grids = probed.get("grid", pd.Series("all", index=probed.index)).fillna("all")
    lines = [
        "Probe length: the same runs probed with repeats of n = C/2 tokens instead of 16 "
        "(50 rows) and refitted:",
        "",
        *markdown(table),
        "",
    ]
    for grid, rows in probed.groupby(grids, sort=False):
        lines += grid_lines(str(grid), rows, final)
    return [*lines, ""]


def grid_lines(grid: str, rows: pd.DataFrame, final: bool = False) -> list[str]:
    """One grid's ratio over runs placed under both probes, its bounds and its verdict."""
    ratio, left = probe_ratio(rows)
    bounds = probe_bounds(rows)
    verdict = probe_verdict(ratio, bounds, final)
    says = {
        AGREES: "the probe's length does not move the emergence point",
        DISAGREES: "the probe's length moves the emergence point",
    }.get(verdict, verdict)
    return [
        f"- {grid}: U(n = C/2) / U(n = 16), geometric mean over {len(rows) - left} run(s) "
        f"placed under both probes ({left} left out): {ratio.text('.2f')}; rule: "
        f"{SAME.says}, and no left-out run bounded outside it -> **{says}**.",
        *[
            f"  - left out, placed under one probe only: {run}, ratio {side} {bound:.2f}"
            for run, side, bound in bounds
        ],
    ]
