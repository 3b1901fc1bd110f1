"""The forecast study's claims and its results file: per prior and point of the run, coverage
of the measured point by the 80% interval (Clopper-Pearson 95% over runs) and its width, against
the prior alone; "adds information" = at least 10% narrower than the prior and covering at
least as often."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ihprobe import Prior
from ihprobe.dynamics.verdicts import INCONCLUSIVE, MIN_SEEDS, Pending, proportion
from ihprobe.jobs.grid import markdown
from lab.studies.forecast import cells

TITLE = "# Live emergence forecast on the demo configuration, judged against its prior (CPU)"
NATURAL_HEADING = "## Natural-text pilots: the forecast against the published law alone"
NATURAL_CSV = "RESULTS_forecast_natural.csv"


WORST = "worst case: runs without a point as the forecast's misses, the prior's hits"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per prior and fraction: coverage (Clopper-Pearson 95% over seeds) and the geometric
    mean width, of the forecast and of the prior alone, over the runs with a measured point;
    the runs without one (no transition: nothing to cover) are counted again in
    :func:`worst_case`'s column."""
    rows = []
    for (name, fraction), g in table.groupby(["prior", "fraction"], sort=False):
        after = f"{fraction:.0%} (update {int(g.at_step.iloc[0])})"
        point = g.measured.notna() if "measured" in g else pd.Series(True, index=g.index)
        row = {"prior": name, **coverage_row(g[point], after)}
        if not point.all():
            row[WORST] = worst_case(g[point], g[~point])
        rows.append(row)
    return pd.DataFrame(rows)


def worst_case(
    placed: pd.DataFrame, left: pd.DataFrame, unit: str = "seed", final: bool = False
) -> str:
    """Coverage counts and the verdict with the runs that have no point to cover (``left``)
    counted the way worst for the forecast: its misses and the prior's hits, their widths as
    measured.

    >>> one = {"width": 2.0, "prior_width": 6.0, "covered": True, "prior_covered": True}
    >>> worst_case(pd.DataFrame([one] * 5), pd.DataFrame([one]))
    '5/6 against 6/6: narrower but covers less often: overconfident'
    """
    worst = pd.concat([placed, left.assign(covered=False, prior_covered=True)])
    return (
        f"{int(worst.covered.sum())}/{len(worst)} against "
        f"{int(worst.prior_covered.sum())}/{len(worst)}: {informs(worst, unit, final)}"
    )


def coverage_row(g: pd.DataFrame, after: str, unit: str = "seed", final: bool = False) -> dict:
    """One table row for runs ``g`` judged at one point (``covered``, ``width``,
    ``prior_covered``, ``prior_width`` per run): coverage with Clopper-Pearson 95% over runs
    (counted as ``unit``) and geometric mean width, of the forecast and of the prior alone."""
    forecast = proportion(g.covered.sum(), len(g), unit)
    prior = proportion(g.prior_covered.sum(), len(g), unit)
    return {
        "after": after,
        "forecast covers": f"{int(g.covered.sum())}/{len(g)} {forecast.text('.2f')}",
        "forecast width (high/low)": f"{np.exp(np.log(g.width).mean()):.2f}",
        "prior covers": f"{int(g.prior_covered.sum())}/{len(g)} {prior.text('.2f')}",
        "prior width": f"{np.exp(np.log(g.prior_width).mean()):.2f}",
        "informs": informs(g, unit, final),
    }


def informs(g: pd.DataFrame, unit: str = "seed", final: bool = False) -> str:
    """Whether the forecast adds information over its prior at this point of the runs: a
    narrower interval (by at least 10%) that covers as often; otherwise what it does. Below
    ``MIN_SEEDS`` runs it is pending, with what the runs so far show (``final``: a closed set
    of runs, which no run will join: inconclusive instead).

    >>> three = pd.DataFrame({"width": [2.0] * 3, "prior_width": [6.0] * 3,
    ...                       "covered": [True] * 3, "prior_covered": [True] * 3})
    >>> informs(three)
    'pending: 3 of 5 seeds (so far adds information: narrower, covers as often)'
    >>> informs(pd.concat([three] * 2))
    'adds information: narrower, covers as often'
    >>> informs(three, "run", final=True).split(" (")[0]
    'inconclusive at this scale: 3 runs, fewer than 5'
    """
    narrower = np.exp(np.log(g.width / g.prior_width).mean()) < 0.9
    same_coverage = g.covered.sum() >= g.prior_covered.sum()
    if narrower and same_coverage:
        said = "adds information: narrower, covers as often"
    elif narrower:
        said = "narrower but covers less often: overconfident"
    else:
        said = "adds nothing yet: as wide as the prior"
    if len(g) < MIN_SEEDS and final:
        return f"{INCONCLUSIVE}: {len(g)} {unit}s, fewer than {MIN_SEEDS} (they show: {said})"
    if len(g) < MIN_SEEDS:
        return f"{Pending(len(g), MIN_SEEDS, unit + 's')} (so far {said})"
    return said


def header(table: pd.DataFrame, command: str, priors: dict[str, Prior], runs: dict) -> list[str]:
    """The lines above the tables: what only the run folders hold (``runs``: ``train_s``, the
    runs' training seconds; ``wall_s``, this invocation's; ``earlier``, one line per earlier
    run) and the configuration. ``--report`` keeps the recorded ones instead."""
    refit_name = [name for name in priors if name != "[A] law"][0]
    refit = priors[refit_name]
    seeds = ", ".join(str(s) for s in table.seed.unique())
    measured = table.drop_duplicates("seed")
    demo = cells.DEMO
    return [
        TITLE,
        "",
        f"Command: `{command}` (from the repository root). Hardware: 2-core CPU shared with other",
        "jobs, one torch thread (as the demo). Wall time: training the runs took "
        f"{runs['train_s']:.0f} s (from the runs' files; per seed in",
        f"`train_wall_s`), this invocation {runs['wall_s']:.0f} s (finished runs are reused).",
        "",
        "Demo configuration (`ihprobe.jobs.demo.DemoConfig`, taken from the demo): "
        f"{demo.layers}-layer GPT-NeoX d{demo.d_model}, {demo.heads} heads, C={demo.context}, "
        f"B={demo.batch_size}, `{demo.producer}` producer {json.dumps(demo.producer_options)}, "
        f"AdamW {demo.lr:g} {demo.schedule}, {demo.steps} updates, {demo.n_checkpoints} "
        f"{demo.checkpoints} checkpoints, plus live probes (max PS, 20 rows). Seeds: {seeds} "
        f"({len(measured)} runs; measured emergence: "
        + ", ".join(f"{m:,}" for m in measured.measured.dropna().astype(int))
        + " updates).",
        "",
        "Each run's `probes.jsonl` is replayed through the forecaster the trainer uses live (each",
        "forecast sees only the probes up to its step; 80% central intervals), and the forecast",
        f"made after {', '.join(f'{a:.0%}' for a in cells.AT)} of the run is judged against the "
        "prior alone (the forecast before any probe): does each 80% interval cover the measured "
        "point (change point of the run's max-PS trajectory, `ihprobe.emergence`), and how wide "
        "is it (high / low, geometric mean over seeds). Coverage: k of n seeds, with a "
        "Clopper-Pearson 95% interval. 'adds information' = at least 10% narrower than the "
        "prior and covering at least as often.",
        "",
        "Priors: `[A] law` is the published law alone (no earlier runs, spread 0.3 decades).",
        f"`{refit_name}` is `law_prior(B, C, law_from=[...])` on two earlier runs of the same",
        "configuration (seed 0) at other batch sizes, their updates the demo's scaled by the",
        f"law's B^-0.37: {'; '.join(runs['earlier'])}. The refit uses the runs with a "
        f"transition ({refit.runs}):",
        "with one, only T is refitted (b and c stay at [A]'s 0.37 and 0.62); with two, T and b.",
        f"It predicts {refit.updates:,.0f} updates for B={demo.batch_size}, spread "
        f"{refit.spread} decades (no residual to measure it).",
        "",
    ]


def render(table: pd.DataFrame, natural: pd.DataFrame, head: list[str]) -> str:
    """The results file: ``head`` (:func:`header`), the demo seeds' summary from their CSV of
    record, and the natural pilots' section from theirs."""
    return "\n".join(
        [
            *head,
            *markdown(summary(table)),
            "",
            f"Per seed, prior and fraction: `RESULTS_forecast.csv` ({len(table)} rows).",
            "",
            *natural_lines(natural),
        ]
    )


def natural_lines(table: pd.DataFrame) -> list[str]:
    """The natural pilots' section: which runs, how judged, the summary per prior."""
    head = [NATURAL_HEADING, ""]
    if table.empty:
        return [*head, "No finished natural-text pilot run with live probes yet.", ""]
    runs = table.drop_duplicates(["pilot", "seed"])
    spans = table.groupby(["prior", "fraction"], sort=False).at_step.agg(["min", "max"])
    after = [
        f"{f:.0%} (update {lo:,}{'' if lo == hi else f'-{hi:,}'})"
        for (_, f), lo, hi in spans.itertuples()
    ]
    found = ", ".join(
        f"`{r.pilot}` seed {r.seed} ({_measured(r.measured)})" for r in runs.itertuples()
    )
    return [
        *head,
        "Every finished pilot run of the natural study (`lab/studies/natural`; natural "
        "text, live probes of max PS on 20 rows at evenly spaced checkpoints, 24 in a pilot's "
        "budget and more in a run extended past it), and the natural grid's `B4-C256` runs, "
        "the first pilot's recipe trained again (32 probes in 2x the law's updates), judged as "
        "above but only read (`--natural`): the prior is the published law alone at the run's "
        "B and C (spread 0.3 decades, as in the live forecast); the measured point is the "
        "change point of the run's max-PS trajectory (`run_emergence`, its own probe of 100 "
        "rows); a run without a transition has no point to cover, so coverage is over the "
        "runs with one, and the last column counts the others again the way worst for the "
        f"forecast. Runs: {found}.",
        "",
        *markdown(summary(table).assign(after=after)),
        "",
        f"Per run, prior and fraction: `{NATURAL_CSV}` ({len(table)} rows).",
        "",
    ]


def _measured(updates) -> str:
    return "no transition" if pd.isna(updates) else f"measured {int(updates):,} updates"
