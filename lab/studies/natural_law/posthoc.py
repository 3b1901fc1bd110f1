"""Post hoc (after the runs, not declared before them): the earlier natural-text seeds re-read
by this study's onset rule, from the live-probe curves their CSV of record keeps
(``lab/studies/natural/RESULTS_papers_natural.csv``), and b between the two C = 256 cells.

Their checkpoints are not kept, so the head check (which needs the final checkpoint) cannot be
applied to them; only the onset can be re-read.

>>> parse_curve("0.0: 0.014 (0.002), 1.3: 0.011 (0.001)")
[(0.0, 0.014, 0.002), (1300000.0, 0.011, 0.001)]
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ihprobe.dynamics.law import censored_ratio
from ihprobe.dynamics.verdicts import judge
from lab.studies.law.claims import CLAIMS, slope
from lab.studies.natural_law.measure import onset_row

PILOTS_CSV = Path(__file__).resolve().parents[1] / "natural" / "RESULTS_papers_natural.csv"
PAIR = ("d128-lr3e-3", "d128-B16")  # B = 4 and B = 16 at C = 256, otherwise the same recipe


def parse_curve(text: str) -> list[tuple[float, float, float]]:
    """``tokens_M: PS (AR), ...`` -> (tokens, PS, AR) triples."""
    out = []
    for item in text.split(", "):
        tokens, rest = item.split(": ")
        ps, ar = rest.split(" ")
        out.append((float(tokens) * 1e6, float(ps), float(ar.strip("()"))))
    return out


def reread(pilots: pd.DataFrame) -> pd.DataFrame:
    """pilot, seed, B, C, updates, censored, tokens, old onset_M: every done seed with a curve."""
    rows = []
    for r in pilots[(pilots.status == "done") & pilots.curve.notna()].itertuples():
        per_update = int(r.B) * int(r.C)
        records = [
            {
                "step": round(t / per_update),
                "tokens": t,
                "max_prefix_matching": ps,
                "ar_accuracy": ar,
            }
            for t, ps, ar in parse_curve(r.curve)
        ]
        onset = onset_row(records, int(r.B), int(r.C))
        rows.append(
            {
                "pilot": r.pilot,
                "seed": int(r.seed),
                "B": int(r.B),
                "C": int(r.C),
                "updates": onset["updates"],
                "censored": onset["censored"],
                "tokens": onset["tokens"],
                "old_onset_M": r.onset_M,
            }
        )
    return pd.DataFrame(rows)


def lines(pilots_csv: Path = PILOTS_CSV) -> list[str]:
    """The results file's post hoc section."""
    if not pilots_csv.is_file():
        return []
    seeds = reread(pd.read_csv(pilots_csv))
    shown = []
    for pilot, group in seeds.groupby("pilot", sort=False):
        said = ", ".join(
            f"{'>= ' if r.censored else ''}{r.updates:,.0f}" for r in group.itertuples()
        )
        shown.append(f"  - `{pilot}` (B = {group.B.iloc[0]}, C = {group.C.iloc[0]}): {said}")
    pair = seeds[seeds.pilot.isin(PAIR)].rename(columns={"pilot": "cell"})
    out = [
        "## Post hoc: the earlier natural-text seeds re-read by this rule",
        "",
        "Added after those runs (not part of the declared design). Onsets in updates by "
        "this study's rule, from the live-probe curves the pilots' CSV keeps (a censored "
        "seed: `>=` its last probe; seeds extended past their budget are read over their "
        "whole record). Their checkpoints are gone, so no head check:",
        "",
        *shown,
        "",
    ]
    if pair.cell.nunique() == 2 and not pair.censored.all():
        b = slope(censored_ratio(pair, PAIR[1], PAIR[0]), 4)
        verdict, why = judge(b, CLAIMS["b"])
        placed = int((~pair.censored).sum())
        out += [
            f"- b between `{PAIR[0]}` (B = 4) and `{PAIR[1]}` (B = 16) at C = 256, "
            f"{placed} of {len(pair)} seeds placed: {b.text('.2f')}: **{verdict}** "
            f"(rule: [A]'s b {CLAIMS['b'].says}; {why}).",
            "",
        ]
    return out
