"""The live forecast judged against its prior on the law grid's runs (issue 24, item 3).

The grid's runs keep no live probes, so each run's max PS at its checkpoints, as the grid
probed them (n = 16, 50 rows; the live probe uses 20 rows), is replayed through the forecaster
the trainer uses live (``studies.forecast.measure.judged``: each forecast sees only the
checkpoints up to its step), with the published law alone as the prior at the run's B and C (spread
0.3 decades). After 10%, 30% and 50% of the run's updates: does the 80% interval cover the run's
emergence point (the grid's fit on all its checkpoints), and how wide is it (high / low),
against the prior's own interval. Computed in the halves pass (``python -m lab.studies law
--halves``), stored in the same rows (``f10_covered``, ``f10_width``, ... ``prior_covered``,
``prior_width``).

>>> [column(0.3, "width"), column(0.5, "covered")]
['f30_width', 'f50_covered']
"""

from __future__ import annotations

import pandas as pd

from ihprobe import EmergencePoint, law_prior
from ihprobe.jobs.grid import markdown
from lab.studies.forecast.cells import AT
from lab.studies.forecast.claims import WORST, coverage_row, worst_case
from lab.studies.forecast.measure import judged
from lab.studies.law.probe_length import flag

PRIOR = "[A] law"


def column(fraction: float, what: str) -> str:
    return f"f{round(fraction * 100)}_{what}"


def forecast_fields(point: EmergencePoint, B: int, C: int, steps: int):
    """A run's forecast columns: per fraction of its ``steps`` the forecast's width, whether
    it covers ``point`` (the fit of its max-PS curve, ``point.curve``: the records replayed)
    and its source (posterior or detected), and the prior's own."""
    records = [
        {"step": int(r.step), "max_prefix_matching": float(r.value)}
        for r in point.curve.itertuples()
    ]
    rows = judged(records, {PRIOR: law_prior(B, C)}, point, steps, {})
    out = {"prior_width": rows[0]["prior_width"], "prior_covered": rows[0]["prior_covered"]}
    for row in rows:
        for what in ("width", "covered", "source"):
            out[column(row["fraction"], what)] = row[what]
    return out


def _judged(rows: pd.DataFrame, fraction: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "covered": rows[column(fraction, "covered")].astype(bool),
            "width": rows[column(fraction, "width")].astype(float),
            "prior_covered": rows.prior_covered.astype(bool),
            "prior_width": rows.prior_width.astype(float),
        }
    )


def forecast_lines(frame: pd.DataFrame, final: bool = False) -> list[str]:
    """Coverage (Clopper-Pearson over runs) and geometric mean width per fraction, forecast
    and prior alone, over the runs placed in full; a censored run or one without a transition
    has no point to cover, so it is counted again the way that is worst for the forecast
    (a miss, its prior's a hit), its widths as measured; nothing when no row has forecast
    columns. ``final``: a closed set of runs (too few is inconclusive, not pending)."""
    key = column(AT[0], "covered")
    if key not in frame or frame[key].isna().all():
        return []
    replayed = frame[frame[key].notna()]
    placed = flag(replayed, "transition") & ~flag(replayed, "censored")
    done, left = replayed[placed], replayed[~placed]
    rows = []
    for fraction in AT:
        after = f"{fraction:.0%} of the run"
        row = coverage_row(_judged(done, fraction), after, unit="run", final=final)
        if len(left):
            row[WORST] = worst_case(_judged(done, fraction), _judged(left, fraction), "run", final)
        rows.append(row)
    return [
        "The live forecast against the published law alone, replayed on each run's "
        "checkpoints as the grid probed them (method in `lab/studies/law/forecast.py`"
        f"; {len(done)} run(s) of {done.cell.nunique()} cell(s) placed in full, "
        + (
            f"{len(left)} censored or without a transition {'has' if len(left) == 1 else 'have'} "
            "no point to cover and counted again in the last column the way worst for the "
            "forecast"
            if len(left)
            else "none left out"
        )
        + "; coverage of the run's own emergence point by the 80% interval, Clopper-Pearson "
        "95% over runs; 'adds information' = at least 10% narrower than the prior and "
        "covering at least as often):",
        "",
        *markdown(pd.DataFrame(rows)),
        "",
    ]
