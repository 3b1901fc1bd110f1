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
from papers_law_report import CLAIMS, slope
from verdicts import Estimate, censored_ratio, judge

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
        {"cell": done.pilot.to_numpy(), "updates": tokens / per_update.to_numpy(float),
         "censored": ~placed.to_numpy()}
    )  # fmt: skip


def natural_b(rows: pd.DataFrame, pair: tuple[str, str] = PAIR) -> Estimate | None:
    """b between the pair's cells (Tobit with a cell term on log10 updates), or None while a
    cell has no finished seed."""
    runs = emergence_runs(rows, pair)
    if runs.empty or runs.cell.nunique() < 2 or runs.censored.all():
        return None
    small, large = pair
    return slope(censored_ratio(runs, large, small), 4)


def natural_b_lines(rows: pd.DataFrame, pair: tuple[str, str] = PAIR) -> list[str]:
    """The results file's section: per-seed emergence updates, b, its verdict."""
    runs = emergence_runs(rows, pair)
    pairs = runs[["updates", "censored"]].itertuples(index=False)
    runs["shown"] = [f"{'>= ' if censored else ''}{updates:,.0f}" for updates, censored in pairs]
    by_cell = runs.groupby("cell", sort=False).shown
    shown = "; ".join(f"`{cell}`: {', '.join(seeds)}" for cell, seeds in by_cell)
    head = [
        "## [A]'s b on natural text (B = 4 vs 16)", "",
        f"`{pair[0]}` (B = 4) and `{pair[1]}` (B = 16) differ only in B: b = -log10(U_16 / U_4) / "
        "log10 4 from each seed's emergence point in updates (`onset_M`; a seed without one is "
        "censored at its last probe and kept by a Tobit fit with a cell term). Rule: [A]'s "
        f"b {B_OF_A.says}, 'agrees' only when the whole interval lies inside. Emergence updates "
        f"per seed: {shown or 'none yet'}.", "",
    ]  # fmt: skip
    b = natural_b(rows, pair)
    if b is None:
        return [*head, "- b: pending (a cell has no finished seed with a change point)."]
    verdict, why = judge(b, B_OF_A)
    return [*head, f"- b = {b.text('.2f')}: **{verdict}** ({why})."]
