"""[A]'s batch exponent b on natural text: the first two cells of a natural-text (B, C) grid.

The natural-text pilots ``d128-lr3e-3`` (B = 4) and ``d128-B16`` (B = 16) share everything else:
the documentation corpus under its 512-id BPE, GPT-NeoX 2 layers x 4 heads, d_model 128 with
MLPs, C = 256, AdamW lr 3e-3 constant after a 1% warm-up. Their seeds' emergence points (the
change point of the live probes' max prefix matching, ``onset_M`` in the pilots' table) give
b = -log10(U_16 / U_4) / log10 4, in updates, the regime [A] fitted its law in: natural text.
A seed whose estimator finds no transition within its budget is censored at its last probe (a
Tobit fit with a cell term keeps it as "at least"), never dropped. Judged against [A]'s
b = 0.37 +- 0.15 like the law grid, and pending until both cells have 5 seeds.

>>> frame = pd.DataFrame({"pilot": ["a", "a", "b"], "B": [4, 4, 16], "C": [256] * 3,
...                       "status": ["done"] * 3, "onset_M": [8.192, None, 8.192],
...                       "tokens_M_seen": [30.0, 30.0, 48.0]})
>>> emergence_runs(frame, ("a", "b"))[["cell", "updates", "censored"]].values.tolist()
[['a', 8000.0, False], ['a', 29296.875, True], ['b', 2000.0, False]]
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ihprobe.dynamics.law import censored_ratio
from ihprobe.dynamics.verdicts import Estimate, judge
from lab.studies.law.claims import CLAIMS, slope

PAIR = ("d128-lr3e-3", "d128-B16")  # B = 4 and B = 16, otherwise the same recipe
B_OF_A = CLAIMS["b"]  # [A]'s b with the law grid's margin, declared before the data


def emergence_runs(rows: pd.DataFrame, pair: tuple[str, str] = PAIR) -> pd.DataFrame:
    """cell, updates, censored: one row per finished seed of the two pilots; a seed without a
    change point is censored at the updates of its last probe."""
    done = rows[rows.pilot.isin(pair) & (rows.status == "done")]
    per_update = done.B * done.C
    placed = done.onset_M.notna()
    tokens = np.where(placed, done.onset_M, done.tokens_M_seen).astype(float) * 1e6
    return pd.DataFrame(
        {
            "cell": done.pilot.to_numpy(),
            "updates": tokens / per_update.to_numpy(float),
            "censored": ~placed.to_numpy(),
        }
    )


def natural_b(rows: pd.DataFrame, pair: tuple[str, str] = PAIR) -> Estimate | None:
    """b between the pair's cells (Tobit with a cell term on log10 updates), or None while a
    cell has no finished seed."""
    runs = emergence_runs(rows, pair)
    if runs.empty or runs.cell.nunique() < 2 or runs.censored.all():
        return None
    small, large = pair
    return slope(censored_ratio(runs, large, small), 4)


def seeds_needed(sd: float, ratio: float, half_width: float, most: int = 1000) -> int | None:
    """Seeds per cell for a t-interval of b between two cells whose B differ ``ratio``-fold to
    have at most ``half_width`` on each side, when one seed's log10 U has SD ``sd``: the least
    n with t(0.975, 2n - 2) sd sqrt(2 / n) / log10(ratio) <= half_width (None beyond ``most``).

    >>> seeds_needed(0.3, 4, 0.15), seeds_needed(0.3, 16, 0.15), seeds_needed(0.05, 4, 0.15)
    (87, 23, 4)
    """
    for n in range(2, most + 1):
        if stats.t.ppf(0.975, 2 * n - 2) * sd * np.sqrt(2 / n) / np.log10(ratio) <= half_width:
            return n
    return None


def spread_lines(runs: pd.DataFrame) -> list[str]:
    """The seeds a natural-text (B, C) grid would need: the pooled within-cell SD of log10 U
    over the seeds with a change point (a censored seed would only widen it), and the seeds
    per cell for b's interval to fit inside the margin (needed to agree) or to clear it at
    b = 1 (needed to disagree with a b near the law grid's)."""
    placed = runs[~runs.censored].assign(log_u=lambda r: np.log10(r.updates))
    groups = [g.log_u.to_numpy() for _, g in placed.groupby("cell") if len(g) > 1]
    dof = sum(len(g) - 1 for g in groups)
    if dof < 2:
        return []
    sd = float(np.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / dof))
    margin, clear = (B_OF_A.high - B_OF_A.low) / 2, 1 - B_OF_A.high
    need = {
        f"{ratio}x apart": [seeds_needed(sd, ratio, h) for h in (margin, clear)]
        for ratio in (4, 16)
    }
    said = "; ".join(
        f"B {k}: {a or '> 1000'} to agree, {d or '> 1000'} to disagree at b = 1"
        for k, (a, d) in need.items()
    )
    return [
        f"- Spread: one seed's log10 U has SD {sd:.2f} within a cell (pooled over {dof} df, the "
        f"seeds with a change point: {10**sd:.1f}x). Seeds per cell for b's t-interval to be at "
        f"most +-{margin:g} (inside the margin) or +-{clear:.2f} (clear of it at b = 1): {said}."
    ]


def natural_b_lines(rows: pd.DataFrame, pair: tuple[str, str] = PAIR) -> list[str]:
    """The results file's section: per-seed emergence updates, b, its verdict."""
    runs = emergence_runs(rows, pair)
    pairs = runs[["updates", "censored"]].itertuples(index=False)
    runs["shown"] = [f"{'>= ' if censored else ''}{updates:,.0f}" for updates, censored in pairs]
    by_cell = runs.groupby("cell", sort=False).shown
    shown = "; ".join(f"`{cell}`: {', '.join(seeds)}" for cell, seeds in by_cell)
    head = [
        "## [A]'s b on natural text (B = 4 vs 16)",
        "",
        f"`{pair[0]}` (B = 4) and `{pair[1]}` (B = 16) differ only in B: b = -log10(U_16 / U_4) / "
        "log10 4 from each seed's emergence point in updates (`onset_M`; a seed without one is "
        "censored at its last probe and kept by a Tobit fit with a cell term). Rule: [A]'s "
        f"b {B_OF_A.says}, 'agrees' only when the whole interval lies inside. Emergence updates "
        f"per seed: {shown or 'none yet'}.",
        "",
    ]
    b = natural_b(rows, pair)
    if b is None:
        return [*head, "- b: pending (a cell has no finished seed with a change point)."]
    verdict, why = judge(b, B_OF_A)
    why = "" if verdict.startswith("pending") else f" ({why})"  # pending: the estimate is shown
    return [*head, f"- b = {b.text('.2f')}: **{verdict}**{why}.", *spread_lines(runs)]
