"""What the forecast study measures: each run trained (or reused), its live probes replayed
through the forecaster the trainer uses (:func:`ihprobe.forecast_records`: each forecast sees
only the probes up to its step), and each forecast judged against the run's measured emergence
point (the change point of its max-PS trajectory, :func:`ihprobe.run_emergence`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ihprobe import (
    Prior,
    TrainConfig,
    checkpoints,
    forecast_figure,
    forecast_records,
    is_finished,
    law_prior,
    run_emergence,
    run_meta,
    train,
)
from lab.studies.forecast import cells


def train_run(config: TrainConfig) -> tuple[Path, float]:
    """Train (or finish, or reuse) one run; seconds spent."""
    out = Path(config.out)
    begin = time.perf_counter()
    if (out / "run.json").is_file() and checkpoints(out)[-1].step == config.steps:
        return out, 0.0
    return train(config), time.perf_counter() - begin


def train_all(out: Path, seeds: list[int]) -> dict[str, Path]:
    """The earlier runs (by name) and the demo seeds (``seed{s}``), trained or reused."""
    runs = {
        name: train_run(cells.config(out / name, 0, b))[0] for name, b in cells.LAW_FROM.items()
    }
    for seed in seeds:
        name = f"B{cells.DEMO.batch_size}-seed{seed}"
        runs[f"seed{seed}"], seconds = train_run(
            cells.config(out / name, seed, cells.DEMO.batch_size)
        )
        print(f"trained seed {seed} in {seconds:.0f} s", flush=True)
    return runs


def priors(runs: dict[str, Path]) -> dict[str, Prior]:
    """The published law alone, and the law refitted on the earlier runs."""
    b, c = cells.DEMO.batch_size, cells.DEMO.context
    earlier = [runs[name] for name in cells.LAW_FROM]
    return {
        "[A] law": law_prior(b, c),
        f"refit ({', '.join(cells.LAW_FROM)})": law_prior(b, c, law_from=earlier),
    }


def wall_seconds(run: Path) -> float:
    """Training wall time from the run's own files: run.json written to last checkpoint."""
    last = sorted((run / "checkpoints").glob("step-*"))[-1]
    return last.stat().st_mtime - (run / "run.json").stat().st_mtime


def check_seed(seed: int, run: Path, priors: dict[str, Prior]) -> list[dict]:
    """One demo seed judged against each prior (:func:`judged`), with its training time; the
    forecast figure of seed 0 (``forecast.html`` in the run)."""
    measured, records = run_emergence(run), probe_records(run)
    rows = judged(records, priors, measured, cells.DEMO.steps, {"seed": seed})
    for row in rows:
        row["train_wall_s"] = round(wall_seconds(run))
    if seed == 0:
        name = [name for name in priors if name != "[A] law"][0]
        figure = forecast_figure(
            forecast_records(records, priors[name]), measured, title=f"forecast over {run.name}"
        )
        figure.write_html(run / "forecast.html", include_plotlyjs="cdn")
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
        for fraction in cells.AT:
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


def earlier_run(run: Path) -> str:
    """How an earlier run was trained and where it emerged, for the results file."""
    config, point = run_meta(run)["config"], run_emergence(run)
    found = (
        f"emerged at ~{point.updates:,.0f}"
        if point.transition
        else f"no transition ({point.reason})"
    )
    return f"B={config['batch_size']}, {config['steps']} updates, {found}"


# the published law alone, at each run's own B and C: one row per fraction over all runs
NATURAL_PRIOR = "[A] law, at each run's B and C"


def natural_runs(root: Path, pattern: str = "*") -> list[tuple[str, int, Path]]:
    """(pilot, seed, folder) of every finished run under ``root``/``pattern`` with live
    probes."""
    return [
        (run.parent.name, int(run.name.removeprefix("seed")), run)
        for run in sorted(root.glob(f"{pattern}/seed*"))
        if (run / "probes.jsonl").is_file() and is_finished(run)
    ]


def natural_rows(root: Path, pattern: str = "*") -> list[dict]:
    """Every finished run under ``root``/``pattern`` judged against the published law
    alone."""
    rows = []
    for pilot, seed, run in natural_runs(root, pattern):
        meta = run_meta(run)
        config, steps = meta["config"], int(meta["steps"])
        prior = {NATURAL_PRIOR: law_prior(config["batch_size"], config["context"])}
        shape = {"pilot": pilot, "seed": seed}
        rows += judged(probe_records(run), prior, run_emergence(run), steps, shape)
    return rows
