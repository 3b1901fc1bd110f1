"""The tables and verdicts of ``RESULTS_papers_law.md``, from one row per cell and seed.

Every number comes from ``ihprobe/dynamics/verdicts.py``: cell means with t-intervals over seeds,
fits on cell means (t, df = cells - parameters) and Tobit fits that keep censored runs at their
bound, each labelled with its method and seeds. A run is *placed* when its steep segment ends inside
the budget; otherwise it is censored at its censored start (a rise cut off by the budget) or at the
budget (no rise at all).

>>> CLAIMS["b"].says, CLAIMS["size"].says
('0.37 +- 0.15', 'within 1.5x either way')
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ihprobe.dynamics.law import censored_contrast, censored_ratio
from ihprobe.dynamics.verdicts import (
    MIN_SEEDS,
    Estimate,
    Pending,
    contrast,
    equal,
    judge,
    same_ratio,
    t_mean,
    welch,
)

# pre-declared before the data: [A]'s exponents +- 0.15, "no change" within 1.5x either way
# (the i.i.d. control's claim: papers_law_control.CLAIM)
CLAIMS = {
    "b": equal(0.37, 0.15),
    "c": equal(0.62, 0.15),
    "size": same_ratio(1.5),
    "same b": equal(0.0, 0.15),
}
COMMAND = ".venv/bin/python -m lab.studies law --cell {}"  # a pending line says what to run


def runs_of(done: pd.DataFrame) -> pd.DataFrame:
    """Done runs as (cell, B, C, updates, censored): a censored run's updates is its bound."""
    placed = done.transition & ~done.censored
    bound = np.where(done.transition, done.updates.astype(float), done.steps.astype(float))
    return pd.DataFrame(
        {
            "cell": done.cell,
            "B": done.B,
            "C": done.C,
            "seed": done.seed,
            "updates": np.where(placed, done.updates.astype(float), bound),
            "censored": ~placed.to_numpy(bool),
        }
    )


def done_of(frame: pd.DataFrame, names) -> pd.DataFrame:
    return frame[frame.cell.isin(list(names)) & (frame.status == "done")]


def waiting(frame: pd.DataFrame, names) -> str | None:
    """``pending: n of 5 seeds ...`` when a cell has fewer than MIN_SEEDS seeds done."""
    counts = done_of(frame, names).groupby("cell").size().reindex(list(names)).fillna(0)
    if counts.min() >= MIN_SEEDS:
        return None
    short = ", ".join(f"`{c}`" for c, n in counts.items() if n < MIN_SEEDS)
    return Pending(counts.min(), MIN_SEEDS, note=f" (seeds left in {short})")


def cell_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, group in frame.groupby("cell", sort=False):
        done = group[group.status == "done"]
        runs = runs_of(done)
        placed = runs[~runs.censored]
        if len(done) == 0:
            value = "nothing done"
        elif runs.censored.any():
            value = f"{runs.censored.sum()} censored: no mean (the Tobit fits count them)"
        else:
            value = t_mean(placed.updates, log=True, needs=1).text(",.0f")
        rows.append(
            {
                "cell": name,
                "B": group.B.iloc[0],
                "C": group.C.iloc[0],
                "updates/run": ",".join(f"{int(x)}" for x in sorted(set(done.steps))) or "-",
                "seeds done": ",".join(str(s) for s in done.seed) or "none",
                "placed / done": f"{len(placed)}/{len(done)}",
                "emergence updates, geometric mean [95% t-interval on log10 over seeds]": value,
                "train s/seed": f"{done.train_s.astype(float).mean():.0f}" if len(done) else "-",
            }
        )
    return pd.DataFrame(rows)


def rerun_lines(frame: pd.DataFrame, extend: int) -> list[str]:
    """Which cells the tables show from their reruns, and each seed's first run -> rerun."""
    reruns = frame[(frame.budget_factor > 1) & (frame.status == "done")]
    if reruns.empty:
        return []
    lines = [
        f"Cells with a seed censored at their budget were rerun, every seed, at {extend}x "
        "that budget (`--extend-censored`); the reruns replace the cell's runs everywhere "
        "below. A rerun is a fresh run, not the first one continued: its 1% warm-up is "
        f"{extend}x as long in updates and its {extend}x longer log-spaced checkpoint grid "
        "puts the checkpoints elsewhere. Emergence updates per seed, first run -> rerun:",
        "",
    ]
    for cell, group in reruns.groupby("cell", sort=False):
        moves = [f"seed {r.seed} {r.first_run} -> {_emergence(r)}" for r in group.itertuples()]
        lines.append(f"- `{cell}`: " + "; ".join(moves) + ".")
    return [*lines, ""]


def _emergence(row) -> str:
    if not row.transition:
        return f"none by {int(row.steps):,}"
    return f"{'>= ' if row.censored else ''}{row.updates:,.0f}"


def ratio_of(frame: pd.DataFrame, cell: str, base: str) -> Estimate:
    """log10 of ``cell``'s emergence over ``base``'s: Welch on log10 when every run is placed,
    else Tobit with a cell term (censored runs at their bound)."""
    runs = runs_of(done_of(frame, [cell, base]))
    if not runs.censored.any():
        return welch(runs[runs.cell == cell].updates, runs[runs.cell == base].updates, log=True)
    return censored_ratio(runs, cell, base)


def compared_lines(frame: pd.DataFrame, size_at: tuple[int, int]) -> list[str]:
    """Size and schedule cells against the base cell: the ratio of emergence points."""
    base = f"sn-B{size_at[0]}-C{size_at[1]}"
    claims = {
        "size-d128": "[A]: the emergence point does not depend on model size (width 128)",
        "size-L3": "[A]: the emergence point does not depend on model size (3 layers)",
        "sched-cosine": "how far a cosine schedule moves the emergence point (no claim)",
    }
    lines = []
    for cell, claim in claims.items():
        if done_of(frame, [cell]).empty or done_of(frame, [base]).empty:
            lines.append(f"- {claim}: pending (no seed of `{cell}` or `{base}` done).")
            continue
        ratio = ratio_of(frame, cell, base)
        shown = f"`{cell}` / `{base}` = {ratio.text('.2f')}"
        if cell.startswith("size"):
            verdict, _ = judge(ratio, CLAIMS["size"])
            lines.append(f"- {claim}: **{verdict}** (rule: {CLAIMS['size'].says}); {shown}.")
        else:
            lines.append(f"- {claim}: {shown}; {waiting(frame, [cell, base]) or 'all seeds done'}.")
    return lines


def repetition_lines(frame: pd.DataFrame) -> list[str]:
    """Natural text's repetition against 0.9 at the same B and C: the ratio of emergence points
    (a comparison added after the natural-repetition runs, judged by the grid's 1.5x rule)."""
    lines = []
    for C in (32, 64, 128):
        cell, base = f"nr-B8-C{C}", f"sn-B8-C{C}"
        if done_of(frame, [cell]).empty or done_of(frame, [base]).empty:
            continue
        ratio = ratio_of(frame, cell, base)
        verdict, _ = judge(ratio, CLAIMS["size"])
        lines.append(
            f"- emergence with natural text's repetition over repetition 0.9 at C = {C} "
            f"(added after the runs; rule: {CLAIMS['size'].says} = no change): "
            f"`{cell}` / `{base}` = {ratio.text('.2f')}: **{verdict}**."
        )
    return lines


def slope(ratio: Estimate, factor: float) -> Estimate:
    """The exponent b of a log10 ratio U_large / U_small between two B a ``factor`` apart:
    -log10(ratio) / log10 factor, its interval from the ratio's.

    >>> slope(Estimate(-0.5, -0.6, -0.4, "m", 5, log10=True), 10).text(".2f")
    '0.50 [0.40, 0.60] (m)'
    """
    k = math.log10(factor)
    return Estimate(
        -ratio.value / k, -ratio.high / k, -ratio.low / k, ratio.method, ratio.seeds, ratio.needs
    )


def slope_of(frame: pd.DataFrame, small: str, large: str, factor: float) -> Estimate:
    """b between two cells of the grid whose B differs by ``factor``."""
    return slope(ratio_of(frame, large, small), factor)


def slope_line(
    frame: pd.DataFrame, label: str, small: str, large: str, factor: float, exponent: str = "b"
) -> str:
    """The exponent (``b``, or ``c`` for two cells whose C differ ``factor``-fold) between two
    cells, judged against [A]'s."""
    if done_of(frame, [small]).empty or done_of(frame, [large]).empty:
        todo = [c for c in (small, large) if done_of(frame, [c]).empty]
        return f"- {label}: pending (`{COMMAND.format(' --cell '.join(todo))}`)."
    value, claim = slope_of(frame, small, large, factor), CLAIMS[exponent]
    verdict, _ = judge(value, claim)
    shown = f"{exponent} = {value.text('.2f')}"
    return f"- {label}: {shown}; against [A]'s {claim.says}: **{verdict}**."


def b_change_line(
    frame: pd.DataFrame, label: str, when: str, new: tuple[str, str], base: tuple[str, str]
) -> str:
    """How far b (B = 8 vs 32) moves from the ``base`` cells to the ``new`` ones, each a
    (B = 8, B = 32) pair: the difference of the two b's from the four cells' mean log10 U
    (Welch-Satterthwaite t, or Tobit with cell terms when a run is censored), judged by the
    exponents' margin (0 +- 0.15 = the same b). ``when``: when the comparison was declared."""
    (new8, new32), (base8, base32) = new, base
    names, weights = [new32, new8, base32, base8], [1, -1, -1, 1]
    claim = CLAIMS["same b"]
    label = f"{label} ({when}; rule: {claim.says} = same b)"
    todo = [n for n in names if done_of(frame, [n]).empty]
    if todo:
        return f"- {label}: pending (`{COMMAND.format(' --cell '.join(todo))}`)."
    runs = runs_of(done_of(frame, names))
    if any(runs[runs.cell == n].censored.all() for n in names):
        return f"- {label}: not estimable (a cell has no placed run)."
    if runs.censored.any():
        log_change = censored_contrast(runs, names, weights)
    else:
        log_change = contrast([runs[runs.cell == n].updates for n in names], weights, log=True)
    change = slope(log_change, 4)
    return f"- {label}: {change.text('.2f')}: **{judge(change, claim)[0]}**."


def lr_change_line(frame: pd.DataFrame, lr: str) -> str:
    """b at C = 64 from lr 3e-3 to ``lr`` (added after the lr 1e-3 runs, before lr 3e-4's)."""
    when = "added after the runs" if lr == "1e-3" else "declared before the runs"
    new, base = (f"lr{lr}-B8-C64", f"lr{lr}-B32-C64"), ("sn-B8-C64", "sn-B32-C64")
    return b_change_line(frame, f"b at lr {lr} minus b at lr 3e-3", when, new, base)


def warmup_change_line(frame: pd.DataFrame, C: int) -> str:
    """b at ``C`` from a 1% warm-up to one fixed in tokens (added after the C = 32 runs, with 4
    of the 10 at C = 128 done)."""
    when = "added after the runs" if C == 32 else "added with 4 of the 10 runs done"
    new, base = (f"wu-B8-C{C}", f"wu-B32-C{C}"), (f"sn-B8-C{C}", f"sn-B32-C{C}")
    label = f"b with the warm-up in tokens minus b with a 1% warm-up at C = {C}"
    return b_change_line(frame, label, when, new, base)
