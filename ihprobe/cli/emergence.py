"""``ihprobe emergence RUN_DIR... [--metric M] [--json]``: when each run's induction heads formed.

Each run's checkpoints are scanned (cached per weights hash) and the change point of the metric
is reported with the checkpoints that bracket it, the threshold crossing, and the law's
prediction for the run's batch size and context.
"""

from __future__ import annotations

import json

from ihprobe.cli import _common as flags
from ihprobe.cli._stages import stage


def add_point_options(p) -> None:
    """Flags shared with ``fit-law`` and ``sweep``: which metric, and the probe settings."""
    p.add_argument("--metric", default="prefix_matching", help="scan metric")
    p.add_argument("--reduce", default="max", choices=("max", "mean", "min"), help="over heads")
    p.add_argument(
        "--threshold",
        type=flags.finite_float,
        help="crossing level (default: 0.3 for prefix_matching)",
    )
    flags.add_probe_rows(p, bos=False)
    p.add_argument("--no-cache", dest="cache", action="store_false", help="rescan everything")
    flags.add_model_flags(p, dtype=False)


# metrics that are shares (of attention or of correct tokens), so a threshold lies in (0, 1);
# losses and ranks are positive; other scores (logit attributions, ICL score) can be any number
SHARES = (
    "prefix_matching",
    "previous_token",
    "duplicate_token",
    "forward_induction_fixed",
    "anti_induction",
    "forward_induction_varied",
    "backward_duplicate",
    "backward_previous_token",
    "ar_accuracy",
    "backward_copy_accuracy",
)
POSITIVE = ("induction_loss", "backward_copy_loss", "ar_mean_rank")


def check_threshold(metric: str, threshold: float | None) -> None:
    """Refuse a ``--threshold`` the metric can never cross, before any checkpoint is scanned.

    >>> check_threshold("prefix_matching", 0.3)
    """
    from ihprobe.core.errors import IhprobeError

    if threshold is None:
        return
    if metric in SHARES and not 0 < threshold < 1:
        raise IhprobeError(
            f"--threshold {threshold:g}: {metric} is a share between 0 and 1, so it can only "
            "cross a level strictly between them (e.g. 0.3)."
        )
    if metric in POSITIVE and threshold <= 0:
        raise IhprobeError(f"--threshold {threshold:g}: {metric} is positive; pass a level > 0.")


def point_kwargs(args) -> dict:
    """The keyword arguments of ``run_emergence`` the flags ask for, checked."""
    from ihprobe.probes.metrics import check_metrics

    check_metrics([args.metric])
    check_threshold(args.metric, args.threshold)
    scan = {"batch": args.batch, "seed": args.seed, "device": args.device}
    if args.n is not None:
        scan["n"] = args.n
    return {
        "metric": args.metric,
        "reduce": args.reduce,
        "threshold": args.threshold,
        "cache": args.cache,
        **scan,
    }


def register(subparsers) -> None:
    p = subparsers.add_parser("emergence", help="find the emergence point of training runs")
    p.add_argument("runs", nargs="+", type=flags.source, metavar="RUN_DIR", help="run directories")
    add_point_options(p)
    p.add_argument(
        "--task",
        action="append",
        default=None,
        help="with --metric fv: a task file of (x, y) pairs, repeatable (default: the built-in "
        "tasks)",
    )
    flags.add_json(p)
    p.add_argument(
        "--html", metavar="FILE", help="write trajectory figures to an HTML page (default: none)"
    )
    flags.add_quiet(p)
    p.set_defaults(func=run)


def describe(point, kwargs: dict) -> str:
    """One human line per run, naming its probe (``point_kwargs``): the trainer's live probes
    use other rows, so their max PS can cross the threshold at another checkpoint."""
    name = point.model
    if not point.transition:
        return f"{name}: no transition ({point.reason})"
    text = (
        f"{name}: {point.metric} emerges at {'>=' if point.at_edge else '~'}"
        f"{point.updates:,.0f} updates / {point.tokens:,.0f} tokens (between checkpoints at "
        f"{point.tokens_low:,.0f} and {point.tokens_high:,.0f} tokens)"
    )
    if point.at_edge:
        last_only = "only the last checkpoint is past its midpoint"
        seen = last_only if point.rise_at_last else "it starts in the last checkpoint interval"
        text += f"; a lower bound: the run ended inside the rise ({seen}); resume it with a "
        text += "larger --tokens to place it"
    if point.threshold_tokens is not None:
        text += f"; first >= {point.threshold:.3g} at {point.threshold_tokens:,.0f} tokens"
    return text + f" (probe: {kwargs['batch']} rows, seed {kwargs['seed']})"


def run(args) -> int:
    from ihprobe.core.files import check_writable_file
    from ihprobe.dynamics.changepoint import run_emergence
    from ihprobe.dynamics.law import predict_emergence

    if args.html:
        check_writable_file(args.html, "--html", page=True)
    kwargs = point_kwargs(args)
    if args.task:  # every task file read and checked before any checkpoint is scanned
        from ihprobe.causal.tasks import read_task
        from ihprobe.core.errors import IhprobeError

        if args.metric != "fv":
            raise IhprobeError(f"--task is fv's task file; pass --metric fv (not {args.metric}).")
        kwargs["tasks"] = [read_task(t) for t in args.task]
    results, sections = [], []
    for run_dir in args.runs:
        stage(
            f"{run_dir}: {args.metric} at every checkpoint, for the change point (cached scans "
            "are reused)"
        )
        point = run_emergence(run_dir, progress=flags.progress(args), **kwargs)
        shape = (point.batch_size, point.context)
        law = predict_emergence(*shape) if all(shape) else None
        notes = _mechanism_notes(run_dir, point, kwargs)
        record = {**point.to_dict(), "at_edge": point.at_edge, "notes": notes}
        if law is not None:
            record["predicted_updates"] = law.updates
        results.append(record)
        if args.html:
            sections.append(_section(run_dir, point, law, notes, kwargs, flags.progress(args)))
        if not args.json:
            line = describe(point, kwargs)
            if law is not None:
                line += f"; the law predicts ~{law.updates:,.0f} updates"
            print("\n".join([line, *(f"  note: {note}" for note in notes)]))
    if args.json:
        print(json.dumps(results, indent=2))
    if args.html:
        from ihprobe.figures.report import write_report

        path = write_report(args.html, "ihprobe emergence", sections)
        if not args.json:
            print(f"figures: {path}")
    return 0


def _mechanism_notes(run_dir, point, kwargs: dict) -> list[str]:
    """For a prefix-matching rise: the heads of the checkpoint where the curve peaks that pass
    prefix matching but not forward induction on snippets of varied length
    (``flags.fixed_offset_notes``)."""
    import pandas as pd

    from ihprobe.dynamics.mechanism import mechanism_scores

    if not point.transition or point.metric != "prefix_matching" or point.curve.empty:
        return []
    peak = point.curve.loc[point.curve["value"].idxmax()]
    step = None if pd.isna(peak["step"]) else int(peak["step"])  # unknown steps: the last
    stage(f"{run_dir}: the peak checkpoint's heads, for content matching vs a fixed offset")
    scan = {k: v for k, v in kwargs.items() if k not in ("metric", "reduce", "threshold", "cache")}
    scores = mechanism_scores(run_dir, step, **scan)
    where = f"at the peak (step {step:,})" if step is not None else "at the last checkpoint"
    return [f"{where} {note}" for note in flags.fixed_offset_notes(scores)]


def _section(run_dir, point, law, notes: list[str], kwargs: dict, bars: bool | None):
    """The run's trajectory figure (the point's metric, and AR accuracy beside it; ``fv``
    beside prefix matching, with a line on the checkpoints where it was skipped)."""

    from ihprobe.dynamics.forecast import read_forecasts
    from ihprobe.dynamics.trajectories import trajectory
    from ihprobe.figures.emergence import head_strip_figure, trajectory_figure
    from ihprobe.figures.forecast import forecast_figure
    from ihprobe.figures.fv_series import fv_trajectory_note
    from ihprobe.figures.report import Section
    from ihprobe.io.runs import losses

    scan = {k: v for k, v in kwargs.items() if k not in ("metric", "reduce", "threshold")}
    beside = ["prefix_matching"] if point.metric == "fv" else []
    metrics = list(dict.fromkeys([point.metric, *beside, "ar_accuracy"]))  # each cached alone
    stage(f"{run_dir}: {' and '.join(metrics)} at every checkpoint, for the --html figure")
    table = trajectory(run_dir, metrics, progress=bars, **scan)
    skipped = fv_trajectory_note(table)
    said = [describe(point, kwargs), *(f"note: {note}" for note in notes)]
    said += [skipped] if skipped else []
    blocks = [*said, trajectory_figure(table, point, law, losses(run_dir))]
    if table.loc[table["metric"] == point.metric, "layer"].notna().any():
        blocks.append(head_strip_figure(table, point.metric))
    forecasts = read_forecasts(run_dir)  # written by train --forecast
    if forecasts:
        blocks.append(forecast_figure(forecasts, point, title="forecast while training"))
    return Section(str(run_dir), blocks)
