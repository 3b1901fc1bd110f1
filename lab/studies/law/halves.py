"""Is a run's emergence point the fit's or the seed's, does the probe's length move it, and
does the live forecast beat its prior? Checks of the law grid that need no training (issue
24), run by ``python -m lab.studies law --halves`` on every finished run folder, one results row
per run in ``RESULTS_papers_law_halves.csv`` (a rerun computes only runs it has no row for;
rows of run folders that are gone stay):

* **Interleaved halves.** The run's max-PS trajectory as the grid probed it (n = 16, 50 rows,
  read back from its ``trajectory-cache``: nothing is probed again) is split into its even- and
  odd-indexed checkpoints past step 0 (step 0 in both), and the emergence point is refitted on
  each half with the grid's estimator (:func:`ihprobe.dynamics.changepoint.emergence`, 3
  segments). Per run d = log10(U_even / U_odd). Over runs: the mean of d (a bias of the
  interleaving, t-interval) and the estimator's SD on half a run's checkpoints, SD(d) / sqrt 2
  (the halves' errors independent; an upper bound for the full run's), against the between-seed
  SD of log10 U pooled over the same cells (placed runs of ``RESULTS_papers_law.csv``), as a
  ratio of SDs with an F interval (df runs - 1 and the pooled df). Rule, declared before the
  data: estimator noise is small next to seed noise when the ratio's whole 95% interval lies
  below :data:`SMALL` (the fit's variance under a quarter of the seed-to-seed variance), not
  small when it lies wholly above, otherwise inconclusive.
* **Probe length n = C/2.** Runs with C >= 128 and the fixed-structure runs are probed again
  with repeats of n = C/2 tokens instead of 16 (cached beside the grid's probe) and refitted
  (the rows here; the ratio and its verdict in :mod:`papers_law_probe_length`).
* **The live forecast against its prior** on the same checkpoints (:mod:`papers_law_forecast`).

Run folders outside the grid, refitted as one cell (their own full fits give the
between-seed spread; the section on stdout)::

    nice -n 19 .venv/bin/python -m lab.studies.law.halves --cell NAME --csv ROWS RUN...

>>> verdict_of(Estimate(0.2, 0.1, 0.4, "F", 6, 5))
'estimator noise is small next to seed noise'
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ihprobe import EmergencePoint, emergence, is_finished, run_meta, trajectory
from ihprobe.dynamics.verdicts import (
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    LEVEL,
    MIN_SEEDS,
    Estimate,
    below,
    judge,
    t_mean,
)
from ihprobe.jobs.grid import markdown
from lab.studies.cli import OneLineParser
from lab.studies.law.forecast import forecast_fields, forecast_lines
from lab.studies.law.probe_length import flag, probe_lines, updates_text

CSV = Path(__file__).resolve().parent / "RESULTS_papers_law_halves.csv"
SCAN = {"n": 16, "batch": 50}  # the grid's probe (validate_papers_law.run_cell)
SMALL = 0.5  # estimator SD / between-seed SD below this: "small next to seed noise"
KEY = ["cell", "seed", "budget_factor"]
SAYS = {
    AGREES: "estimator noise is small next to seed noise",
    DISAGREES: "estimator noise on half the checkpoints is not small next to seed noise",
    INCONCLUSIVE: "inconclusive at this scale",
}


def long_probe(grid: str, context: int) -> bool:
    """Whether a run is probed again with n = C/2: C >= 128 or the fixed-structure grid."""
    return context >= 128 or grid == "fixed-structure"


# ----------------------------------------------------------------------------- per run


def interleaved(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's trajectory table cut into its even- and odd-indexed checkpoints past step 0
    (in training order); the step-0 rows go to both.

    >>> t = pd.DataFrame({"step": [0, 1, 2, 4, 8], "value": 0.0})
    >>> [half.step.tolist() for half in interleaved(t)]
    [[0, 1, 4], [0, 2, 8]]
    """
    later = sorted(int(s) for s in table.step.unique() if s > 0)
    zero = table.step == 0
    return tuple(table[zero | table.step.isin(later[k::2])] for k in (0, 1))


def _fields(p: EmergencePoint, steps: int, prefix: str) -> dict:
    """An emergence point's row fields: ``{prefix}updates``, ``transition``, ``censored``."""
    return {
        f"{prefix}updates": p.updates if p.transition else None,
        f"{prefix}transition": bool(p.transition),
        f"{prefix}censored": bool(p.transition and p.updates_high >= steps),
    }


def run_row(run: Path, shape: dict, cache_name: str = "trajectory-cache") -> dict:
    """One run's results row: the full fit, the two halves, the forecast replayed on the
    checkpoints (:mod:`papers_law_forecast`) and (where :func:`long_probe`, or
    ``shape["long"]``) the fit on n = C/2 probes. ``shape``: cell, seed, budget_factor, grid."""
    started = time.perf_counter()
    meta = run_meta(run)
    B, C, steps = meta["config"]["batch_size"], meta["config"]["context"], int(meta["steps"])
    cache = run / cache_name
    table = trajectory(run, ["prefix_matching"], cache=cache, progress=False, **SCAN)
    even, odd = interleaved(table)
    row = {**shape, "B": B, "C": C, "steps": steps, "checkpoints": int(table.step.nunique())}
    full = emergence(table, batch_size=B, context=C)
    row.update(_fields(full, steps, ""))
    for half, prefix in ((even, "even_"), (odd, "odd_")):
        row.update(_fields(emergence(half, batch_size=B, context=C), steps, prefix))
    row.update(forecast_fields(full, B, C, steps))
    row["n_long"] = C // 2 if shape.get("long", long_probe(shape["grid"], C)) else None
    if row["n_long"]:
        scan = {**SCAN, "n": row["n_long"]}
        longer = trajectory(run, ["prefix_matching"], cache=cache, progress=False, **scan)
        row.update(_fields(emergence(longer, batch_size=B, context=C), steps, "long_"))
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def finished_runs(cells: dict, seeds, factors, run_dir: Callable) -> list[tuple[Path, dict]]:
    """(folder, shape) of every finished run: ``run_dir(cell, seed, factor)`` holds the grid's
    ``result.json``."""
    out = []
    for name, cell in cells.items():
        for seed in seeds:
            for factor in factors:
                folder = Path(run_dir(name, seed, factor))
                if (folder / "result.json").is_file():
                    shape = {
                        "cell": name,
                        "seed": seed,
                        "budget_factor": factor,
                        "grid": cell["grid"],
                    }
                    out.append((folder, shape))
    return out


def read(csv: Path | None = None) -> pd.DataFrame:
    """The saved rows of ``csv`` (default :data:`CSV`; an empty frame with the key columns when
    there are none)."""
    csv = csv or CSV
    return pd.read_csv(csv) if csv.is_file() else pd.DataFrame(columns=KEY)


def update(runs: list[tuple[Path, dict]], csv: Path | None = None) -> pd.DataFrame:
    """Rows for ``runs`` not yet in ``csv`` (default :data:`CSV`; or whose checkpoints
    changed), saved after each run so a killed pass resumes; rows of runs not listed stay."""
    csv = csv or CSV
    frame = read(csv)
    for folder, shape in runs:
        key = tuple(shape[k] for k in KEY)
        known = frame[(frame[KEY] == pd.Series(key, index=KEY)).all(axis=1)]
        count = len({p.name for p in (folder / "checkpoints").glob("step-*")})
        if len(known) and int(known.checkpoints.iloc[0]) == count:
            continue
        row = run_row(folder, shape)
        rest = frame.drop(known.index)  # an empty frame would turn the new row's ints to floats
        new = pd.DataFrame([row])
        frame = pd.concat([rest, new], ignore_index=True) if len(rest) else new
        frame = frame.sort_values(KEY, kind="stable").reset_index(drop=True)
        tmp = csv.with_suffix(".tmp")
        frame.to_csv(tmp, index=False)
        tmp.replace(csv)
    return frame


# ----------------------------------------------------------------------------- statistics


def refitted(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs placed in full and with a transition in both halves, with ``d`` = log10(even/odd)."""
    ok = flag(frame, "transition") & ~flag(frame, "censored")
    ok &= flag(frame, "even_transition") & flag(frame, "odd_transition")
    rows = frame[ok]
    d = np.log10(rows.even_updates.astype(float) / rows.odd_updates.astype(float))
    return rows.assign(d=d.to_numpy())


def between_seeds(law: pd.DataFrame, cells) -> tuple[float, int]:
    """Pooled between-seed variance of log10 U over ``cells`` (placed runs of the law
    results, cells with >= 2) and its df.

    >>> law = pd.DataFrame({"cell": ["a"] * 3 + ["b"] * 2, "status": "done", "transition": True,
    ...     "censored": False, "updates": [10, 100, 1000, 10, 10]})
    >>> between_seeds(law, ["a", "b"])
    (0.6666666666666666, 3)
    """
    placed = law[(law.status == "done") & flag(law, "transition") & ~flag(law, "censored")]
    placed = placed[placed.cell.isin(list(cells))]
    logs = np.log10(placed.updates.astype(float)).groupby(placed.cell)
    sums = logs.apply(lambda y: float(((y - y.mean()) ** 2).sum()))
    df = int((logs.size() - 1).clip(lower=0).sum())
    return (float(sums.sum()) / df if df else math.nan), df


def sd_interval(variance: float, df: int) -> Estimate:
    """An SD from a variance on ``df`` degrees of freedom, with its chi-square 95% interval.

    >>> sd_interval(0.01, 10).text(".3f")
    '0.100 [0.070, 0.175] (chi-square, df 10)'
    """
    method = f"chi-square, df {df}"
    if df < 1 or not variance >= 0:
        return Estimate(math.nan, math.nan, math.nan, method, df)
    tail = (1 - LEVEL) / 2
    low, high = (math.sqrt(df * variance / stats.chi2.ppf(q, df)) for q in (1 - tail, tail))
    return Estimate(math.sqrt(variance), low, high, method, df)


def noise_ratio(d, between: float, df_between: int, needs: int = MIN_SEEDS) -> Estimate:
    """SD(d) / sqrt 2 over the between-seed SD, with the F interval of the variance ratio.

    >>> r = noise_ratio([0.1, -0.1, 0.1, -0.1, 0.0], 0.04, 8)  # sqrt(0.01 / 2 / 0.04)
    >>> round(r.value, 3), r.low < r.value < r.high
    (0.354, True)
    """
    d = np.asarray(d, float)
    n, df_w = len(d), len(d) - 1
    method = f"F interval on the variances, {n} runs, between-seed df {df_between}"
    if df_w < 1 or df_between < 1 or not between > 0:
        return Estimate(math.nan, math.nan, math.nan, method, n, needs)
    ratio = d.var(ddof=1) / 2 / between
    tail = (1 - LEVEL) / 2
    low = ratio / stats.f.ppf(1 - tail, df_w, df_between)
    high = ratio / stats.f.ppf(tail, df_w, df_between)
    return Estimate(math.sqrt(ratio), math.sqrt(low), math.sqrt(high), method, n, needs)


def verdict_of(ratio: Estimate, final: bool = False) -> str:
    """The sentence for the estimator-vs-seed ratio, by the declared rule (see the docstring);
    ``final``: a closed set of runs, where too few placed is inconclusive, not pending.

    >>> four = Estimate(0.05, 0.01, 0.2, "F", 4, 5)   # small, but 4 runs of the 5 needed
    >>> verdict_of(four), verdict_of(four, final=True)
    ('pending: 4 of 5 seeds', 'inconclusive at this scale')
    >>> verdict_of(Estimate(0.05, 0.01, 0.2, "F", 5))
    'estimator noise is small next to seed noise'
    """
    verdict, _ = judge(ratio, below(SMALL), final=final)
    return SAYS.get(verdict, verdict)


# ----------------------------------------------------------------------------- report


def cell_table(refit: pd.DataFrame, law: pd.DataFrame) -> pd.DataFrame:
    """Per cell: each refitted run's halves, the estimator SD on half the checkpoints and the
    cell's between-seed SD of log10 U."""
    rows = []
    for cell, group in refit.groupby("cell", sort=False):
        variance, df = between_seeds(law, [cell])
        halves = "; ".join(
            f"seed {r.seed}{'' if r.budget_factor == 1 else ' (x2)'}: "
            f"{updates_text(r.even_updates)} / {updates_text(r.odd_updates)}"
            for r in group.itertuples()
        )
        half_sd = f"{math.sqrt(group.d.var(ddof=1) / 2):.3f}" if len(group) > 1 else "-"
        rows.append(
            {
                "cell": cell,
                "runs": len(group),
                "U even / U odd": halves,
                "log10(even/odd)": ", ".join(f"{d:+.3f}" for d in group.d),
                "estimator SD, half the checkpoints (log10)": half_sd,
                "between-seed SD (log10)": f"{math.sqrt(variance):.3f} ({df + 1} seeds)"
                if df
                else "-",
            }
        )
    return pd.DataFrame(rows)


def halves_lines(frame: pd.DataFrame, law: pd.DataFrame, final: bool = False) -> list[str]:
    """The interleaved-halves refit: per cell, then the estimator-vs-seed verdict (``final``:
    a closed set of runs)."""
    refit = refitted(frame)
    left = len(frame) - len(refit)
    lines = [
        f"Interleaved halves: {len(frame)} run(s) refitted, {len(refit)} placed in full "
        f"with a transition in both halves ({left} left out: censored, or no transition "
        "in the run or in a half).",
        "",
    ]
    if refit.empty:
        return lines
    variance, df = between_seeds(law, refit.cell.unique())
    ratio = noise_ratio(refit.d, variance, df)
    bias = t_mean(refit.d, unit="run")
    lines += [
        *markdown(cell_table(refit, law)),
        "",
        f"- mean log10(U_even / U_odd) over runs: {bias.text('+.3f')} (a bias of the "
        "interleaving; the odd half's checkpoints sit half a grid step later).",
        "- estimator SD on half the checkpoints, SD(d)/sqrt 2, in log10 U: "
        f"{sd_interval(refit.d.var(ddof=1) / 2, len(refit) - 1).text('.3f')}; between-seed "
        f"SD pooled over the same {refit.cell.nunique()} cell(s): "
        f"{sd_interval(variance, df).text('.3f')}; their ratio {ratio.text('.2f')}.",
        f"- rule (declared before the data): the ratio's whole 95% interval below {SMALL} "
        f"-> small, wholly above -> not small: **{verdict_of(ratio, final)}**.",
        "",
    ]
    return lines


def section_lines(frame: pd.DataFrame, law: pd.DataFrame, source: str = "") -> list[str]:
    """The section of ``RESULTS_papers_law.md`` (``frame``: :func:`read`; ``law``: the grid's
    rows, for the between-seed spread; ``source``: what was refitted, default the grid's run
    folders)."""
    source = source or (
        "Each finished run folder of the grid refitted from the trajectory "
        "the grid probed (`--halves`; method in "
        f"`lab/studies/law/halves.py`, rows in `{CSV.name}`)."
    )
    head = [
        "## Without training: interleaved halves, a longer probe, the forecast (issue 24)",
        "",
        source,
        "",
    ]
    if frame.empty:
        return [
            *head,
            "No run folders yet: `runs/` is not committed, and the results rows of "
            "earlier runs carry no trajectory; the refit covers each run folder of the "
            "grid as it finishes.",
            "",
        ]
    return [*head, *checks_lines(frame, law)]


def checks_lines(frame: pd.DataFrame, law: pd.DataFrame, final: bool = False) -> list[str]:
    """The three checks of ``frame``'s runs: the halves, the probe's length, the forecast
    (``final``: a closed set of runs, which no seed will join)."""
    return [
        *halves_lines(frame, law, final),
        *probe_lines(frame, final),
        *forecast_lines(frame, final),
    ]


def one_cell_lines(frame: pd.DataFrame, cell: str, csv_name: str) -> list[str]:
    """The checks of run folders outside the grid refitted as one set ``cell`` (rows in
    ``csv_name``, markdown): the between-seed spread is that of their own full fits, pooled
    within the frame's cells where it has more than one. The set is closed (every folder it
    will have), so a check short of placed runs is inconclusive, not pending."""
    source = (
        f"`{cell}`: {len(frame)} run folder(s) refitted (method in "
        f"`lab/studies/law/halves.py`, rows in {csv_name}); the between-seed "
        "spread is that of their own full fits."
    )
    return [source, "", *checks_lines(frame, frame.assign(status="done"), final=True)]


def main(argv: list[str] | None = None) -> None:
    """Refit run folders outside the grid as one cell: rows in ``--csv``, the section on
    stdout."""
    parser = OneLineParser(description=main.__doc__.split(":")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished ihprobe run folders")
    parser.add_argument("--cell", required=True, help="the name the runs are shown under")
    parser.add_argument("--csv", type=Path, required=True, help="rows, resumable")
    parser.add_argument("--long", action="store_true", help="also probe with n = C/2")
    args = parser.parse_args(argv)
    unfinished = [str(run) for run in args.runs if not is_finished(run)]
    if unfinished:
        parser.exit(2, f"not finished ihprobe runs: {unfinished}; pass finished run folders.\n")
    shapes = [
        (
            run,
            {
                "cell": args.cell,
                "seed": int(run_meta(run)["config"]["seed"]),
                "budget_factor": 1,
                "grid": args.cell,
                "long": args.long,
            },
        )
        for run in args.runs
    ]
    frame = update(shapes, args.csv)
    print("\n".join(one_cell_lines(frame, args.cell, f"`{args.csv.name}`")))


if __name__ == "__main__":
    main()
