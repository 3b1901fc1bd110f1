"""Validation of the live emergence forecast on the demo configuration (README "Validation").

Trains the demo configuration (:class:`ihprobe.jobs.demo.DemoConfig`'s training settings, taken from
the demo itself, one torch thread as the demo uses) for five seeds with live probes, plus two
earlier runs at B = B/2 and 2B (seed 0) that play the user's ``--law-from`` runs; their
updates are the demo's scaled by the published law's ratio U(B') / U(B) (B^-0.37), so each
runs as far past its expected emergence as the demo does. For each seed it replays the run's
``probes.jsonl`` through the forecaster the trainer uses live
(:func:`ihprobe.dynamics.forecast.forecast_records`: each forecast sees only the probes up to
its step)
and judges the forecast against its prior alone, retrospectively: after 10%, 30% and 50% of
the run, does its 80% interval cover the measured emergence point (the change point of the run's
max-PS trajectory, ``run_emergence``), and how wide is it (high / low), against the prior's own
80% interval (the forecast before any probe). Coverage gets a Clopper-Pearson 95% interval over
seeds (``verdicts.proportion``).

``--natural`` judges the same way, only reading them, every finished natural-text pilot run
with live probes (``studies/natural/run.py``, ``runs/validate-papers/natural``)
against the published law alone at its B and C: rows in ``RESULTS_forecast_natural.csv``, a
section of ``RESULTS_forecast.md`` (rewritten in place; the demo's part stays).

Every run is resumable: rerunning the script reuses finished runs and continues unfinished
ones. Writes ``RESULTS_forecast.md`` and ``RESULTS_forecast.csv`` beside it. From the repository
root: ``nice -n 15 .venv/bin/python -m studies forecast
[--seeds 0 1 2 3 4]``.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import ihprobe
from ihprobe import (
    Prior,
    TrainConfig,
    forecast_figure,
    forecast_records,
    law_prior,
    predict_emergence,
    run_emergence,
    train,
)
from ihprobe.dynamics.verdicts import proportion
from ihprobe.io.runs import is_finished, run_meta, run_shape
from ihprobe.jobs.demo import DemoConfig, _train_config, variants
from ihprobe.jobs.grid import markdown
from studies.study import ROOT

DEMO = DemoConfig(progress=False)
LAW_FROM = {"B16": DEMO.batch_size // 2, "B64": DEMO.batch_size * 2}  # earlier runs' B
AT = (0.1, 0.3, 0.5)  # the forecasts judged: those made after these fractions of the run
NATURAL = ROOT / "runs" / "validate-papers" / "natural"
OUT_MD = Path(__file__).with_name("RESULTS_forecast.md")
NATURAL_CSV = Path(__file__).with_name("RESULTS_forecast_natural.csv")
NATURAL_HEADING = "## Natural-text pilots: the forecast against the published law alone"


def demo_train_config(out: Path, seed: int, batch_size: int) -> TrainConfig:
    """The demo's TrainConfig with live probes, at ``batch_size`` (updates scaled by the law)."""
    scale = (
        predict_emergence(batch_size, DEMO.context).updates
        / predict_emergence(DEMO.batch_size, DEMO.context).updates
    )
    steps = math.ceil(DEMO.steps * scale / DEMO.n_checkpoints) * DEMO.n_checkpoints
    config = replace(DEMO, seed=seed, batch_size=batch_size, steps=steps)
    producer, options = variants(config)["main"]
    return replace(_train_config(config, out, producer, options), live_probes=True, resume=True)


def train_run(config: TrainConfig) -> tuple[Path, float]:
    """Train (or finish, or reuse) one run; seconds spent."""
    out = Path(config.out)
    begin = time.perf_counter()
    if (out / "run.json").is_file() and ihprobe.checkpoints(out)[-1].step == config.steps:
        return out, 0.0
    return train(config), time.perf_counter() - begin


def train_all(out: Path, seeds: list[int]) -> dict[str, Path]:
    runs = {name: train_run(demo_train_config(out / name, 0, b))[0] for name, b in LAW_FROM.items()}
    for seed in seeds:
        name = f"B{DEMO.batch_size}-seed{seed}"
        runs[f"seed{seed}"], seconds = train_run(
            demo_train_config(out / name, seed, DEMO.batch_size)
        )
        print(f"trained seed {seed} in {seconds:.0f} s", flush=True)
    return runs


def wall_seconds(run: Path) -> float:
    """Training wall time from the run's own files: run.json written to last checkpoint."""
    last = sorted((run / "checkpoints").glob("step-*"))[-1]
    return last.stat().st_mtime - (run / "run.json").stat().st_mtime


def check_seed(seed: int, run: Path, priors: dict[str, Prior]) -> list[dict]:
    """One demo seed judged against each prior (:func:`judged`), with its training time; the
    forecast figure of seed 0."""
    measured, records = run_emergence(run), probe_records(run)
    rows = judged(records, priors, measured, DEMO.steps, {"seed": seed})
    for row in rows:
        row["train_wall_s"] = round(wall_seconds(run))
    if seed == 0:
        name = [name for name in priors if name != "[A] law"][0]
        _figure(forecast_records(records, priors[name]), measured, run)
    return rows


def probe_records(run: Path) -> list[dict]:
    """A run's live probes (``probes.jsonl``), one dict per checkpoint."""
    return [json.loads(line) for line in (run / "probes.jsonl").read_text().splitlines()]


def judged(records, priors: dict[str, Prior], measured, steps: int, shape: dict) -> list[dict]:
    """Replay a run's probe ``records`` through each prior's forecaster: per prior and
    fraction of the run's ``steps``, the forecast's 80% interval and the prior's own, and
    whether each covers the ``measured`` point; each row starts with ``shape``."""
    rows = []
    for name, prior in priors.items():
        forecasts = {f.at_step: f for f in forecast_records(records, prior)}
        alone = forecasts[0]  # before any probe: the prior's own interval
        for fraction in AT:
            at = max(step for step in forecasts if step <= fraction * steps)
            f = forecasts[at]
            rows.append(
                {
                    **shape,
                    "prior": name,
                    "fraction": fraction,
                    "at_step": at,
                    "source": f.source,
                    "forecast": round(f.updates),
                    "low": round(f.updates_low),
                    "high": round(f.updates_high),
                    "width": f.updates_high / f.updates_low,
                    "covered": _covers(f, measured),
                    "prior_low": round(alone.updates_low),
                    "prior_high": round(alone.updates_high),
                    "prior_width": alone.updates_high / alone.updates_low,
                    "prior_covered": _covers(alone, measured),
                    "measured": round(measured.updates) if measured.transition else None,
                    "measured_bracket": f"{measured.updates_low:.0f}-{measured.updates_high:.0f}"
                    if measured.transition
                    else None,
                }
            )
    return rows


def _covers(forecast, measured) -> bool:
    return bool(measured.transition and forecast.covers(measured.updates))


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per prior and fraction: coverage (Clopper-Pearson 95% over seeds) and the geometric
    mean width, of the forecast and of the prior alone."""
    rows = []
    for (name, fraction), g in table.groupby(["prior", "fraction"], sort=False):
        after = f"{fraction:.0%} (update {int(g.at_step.iloc[0])})"
        rows.append({"prior": name, **coverage_row(g, after)})
    return pd.DataFrame(rows)


def coverage_row(g: pd.DataFrame, after: str, unit: str = "seed") -> dict:
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
        "informs": informs(g),
    }


def informs(g: pd.DataFrame) -> str:
    """Whether the forecast adds information over its prior at this point of the runs: a
    narrower interval (by at least 10%) that covers as often; otherwise what it does."""
    narrower = np.exp(np.log(g.width / g.prior_width).mean()) < 0.9
    same_coverage = g.covered.sum() >= g.prior_covered.sum()
    if narrower and same_coverage:
        return "adds information: narrower, covers as often"
    if narrower:
        return "narrower but covers less often: overconfident"
    return "adds nothing yet: as wide as the prior"


def _figure(forecasts, measured, run: Path) -> None:
    forecast_figure(forecasts, measured, title=f"forecast over {run.name}").write_html(
        run / "forecast.html", include_plotlyjs="cdn"
    )


def write_results(table: pd.DataFrame, command: str, priors: dict, runs: dict, wall: float) -> None:
    refit_name = [name for name in priors if name != "[A] law"][0]
    refit = priors[refit_name]
    earlier = "; ".join(_earlier_run(runs[name]) for name in LAW_FROM)
    seeds = ", ".join(str(s) for s in table.seed.unique())
    measured = table.drop_duplicates("seed")
    lines = [
        "# Live emergence forecast on the demo configuration, judged against its prior (CPU)",
        "",
        f"Command: `{command}` (from the repository root). Hardware: 2-core CPU shared with other",
        "jobs, one torch thread (as the demo). Wall time: training the runs took "
        f"{sum(wall_seconds(r) for r in runs.values()):.0f} s (from the runs' files; per seed in",
        f"`train_wall_s`), this invocation {wall:.0f} s (finished runs are reused).",
        "",
        "Demo configuration (`ihprobe.jobs.demo.DemoConfig`, taken from the demo): "
        f"{DEMO.layers}-layer GPT-NeoX d{DEMO.d_model}, {DEMO.heads} heads, C={DEMO.context}, "
        f"B={DEMO.batch_size}, `{DEMO.producer}` producer {json.dumps(DEMO.producer_options)}, "
        f"AdamW {DEMO.lr:g} {DEMO.schedule}, {DEMO.steps} updates, {DEMO.n_checkpoints} "
        f"{DEMO.checkpoints} checkpoints, plus live probes (max PS, 20 rows). Seeds: {seeds} "
        f"({len(measured)} runs; measured emergence: "
        + ", ".join(f"{m:,}" for m in measured.measured.dropna().astype(int))
        + " updates).",
        "",
        "Each run's `probes.jsonl` is replayed through the forecaster the trainer uses live (each",
        "forecast sees only the probes up to its step; 80% central intervals), and the forecast",
        f"made after {', '.join(f'{a:.0%}' for a in AT)} of the run is judged against the prior "
        "alone (the forecast before any probe): does each 80% interval cover the measured point "
        "(change point of the run's max-PS trajectory, `ihprobe.emergence`), and how wide is it "
        "(high / low, geometric mean over seeds). Coverage: k of n seeds, with a Clopper-Pearson "
        "95% interval. 'adds information' = at least 10% narrower than the prior and covering "
        "at least as often.",
        "",
        "Priors: `[A] law` is the published law alone (no earlier runs, spread 0.3 decades).",
        f"`{refit_name}` is `law_prior(B, C, law_from=[...])` on two earlier runs of the same",
        "configuration (seed 0) at other batch sizes, their updates the demo's scaled by the",
        f"law's B^-0.37: {earlier}. The refit uses the runs with a transition ({refit.runs}):",
        "with one, only T is refitted (b and c stay at [A]'s 0.37 and 0.62); with two, T and b.",
        f"It predicts {refit.updates:,.0f} updates for B={DEMO.batch_size}, spread "
        f"{refit.spread} decades (no residual to measure it).",
        "",
        *markdown(summary(table)),
        "",
        f"Per seed, prior and fraction: `RESULTS_forecast.csv` ({len(table)} rows).",
        "",
        *natural_lines(pd.read_csv(NATURAL_CSV) if NATURAL_CSV.is_file() else pd.DataFrame()),
    ]
    OUT_MD.write_text("\n".join(lines))
    table.assign(command=command).to_csv(
        Path(__file__).with_name("RESULTS_forecast.csv"), index=False
    )
    print("\n".join(lines))


def _earlier_run(run: Path) -> str:
    config, point = run_meta(run)["config"], run_emergence(run)
    found = (
        f"emerged at ~{point.updates:,.0f}"
        if point.transition
        else f"no transition ({point.reason})"
    )
    return f"B={config['batch_size']}, {config['steps']} updates, {found}"


def natural_runs(root: Path) -> list[tuple[str, int, Path]]:
    """(pilot, seed, folder) of every finished pilot run under ``root`` with live probes."""
    return [
        (run.parent.name, int(run.name.removeprefix("seed")), run)
        for run in sorted(root.glob("*/seed*"))
        if (run / "probes.jsonl").is_file() and is_finished(run)
    ]


def natural(root: Path) -> None:
    """Judge every finished pilot run against the published law alone; save the rows and
    rewrite the natural section of ``RESULTS_forecast.md``."""
    rows = []
    for pilot, seed, run in natural_runs(root):
        prior = {f"[A] law ({pilot})": law_prior(*run_shape(run))}
        steps = int(run_meta(run)["steps"])
        shape = {"pilot": pilot, "seed": seed}
        rows += judged(probe_records(run), prior, run_emergence(run), steps, shape)
    table = pd.DataFrame(rows)
    table.to_csv(NATURAL_CSV, index=False)
    text = OUT_MD.read_text() if OUT_MD.is_file() else ""
    kept = text.split(NATURAL_HEADING)[0].rstrip("\n")
    OUT_MD.write_text("\n".join([kept, "", *natural_lines(table)]))
    print("\n".join(natural_lines(table)))


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
        "Every finished pilot run of `benchmarks/validate_papers_natural.py` (natural "
        "text, live probes of max PS on 20 rows at evenly spaced checkpoints, 24 in a pilot's "
        "budget and more in a run extended past it), judged as "
        "above but only read (`--natural`): the prior is the published law alone at the run's "
        "B and C (spread 0.3 decades, as in the live forecast); the measured point is the "
        "change point of the run's max-PS trajectory (`run_emergence`, its own probe of 100 "
        f"rows). Runs: {found}.",
        "",
        *markdown(summary(table).assign(after=after)),
        "",
        f"Per run, prior and fraction: `{NATURAL_CSV.name}` ({len(table)} rows).",
        "",
    ]


def _measured(updates) -> str:
    return "no transition" if pd.isna(updates) else f"measured {int(updates):,} updates"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-forecast-demo"))
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--natural", action="store_true", help="only judge the natural pilots")
    args = parser.parse_args(argv)
    if args.natural:
        return natural(NATURAL)
    begin = time.perf_counter()
    torch.set_num_threads(DEMO.threads)  # as the demo: more threads spin on shared cores
    runs = train_all(Path(args.out), args.seeds)
    if args.train_only:
        return
    b, c = DEMO.batch_size, DEMO.context
    priors = {
        "[A] law": law_prior(b, c),
        f"refit ({', '.join(LAW_FROM)})": law_prior(b, c, law_from=[runs[n] for n in LAW_FROM]),
    }
    rows = [row for seed in args.seeds for row in check_seed(seed, runs[f"seed{seed}"], priors)]
    command = "nice -n 15 .venv/bin/python -m studies forecast " + shlex.join(sys.argv[1:])
    wall = time.perf_counter() - begin
    write_results(pd.DataFrame(rows), command.strip(), priors, runs, wall)


if __name__ == "__main__":
    main()
