"""``ihprobe emergence RUN_DIR... [--metric M] [--json]``: when each run's induction heads formed.

Each run's checkpoints are scanned (cached per weights hash) and the change point of the metric
is reported with the checkpoints that bracket it, the threshold crossing, and the law's
prediction for the run's batch size and context.
"""

from __future__ import annotations

import json


def add_point_options(p) -> None:
    """Flags shared with ``fit-law`` and ``sweep``: which metric, and the probe settings."""
    p.add_argument("--metric", default="prefix_matching", help="scan metric (default PS)")
    p.add_argument("--reduce", default="max", choices=("max", "mean", "min"),
                   help="over heads")  # fmt: skip
    p.add_argument("--threshold", type=float, help="crossing level (default 0.3 for PS)")
    p.add_argument("-n", type=int, help="half-length of the repeated-token probe")
    p.add_argument("--batch", type=int, default=100, help="probe rows (default 100)")
    p.add_argument("--seed", type=int, default=0, help="probe seed")
    p.add_argument("--no-cache", dest="cache", action="store_false", help="rescan everything")


def point_kwargs(args) -> dict:
    scan = {"batch": args.batch, "seed": args.seed}
    if args.n is not None:
        scan["n"] = args.n
    return {"metric": args.metric, "reduce": args.reduce, "threshold": args.threshold,
            "cache": args.cache, **scan}  # fmt: skip


def register(subparsers) -> None:
    p = subparsers.add_parser("emergence", help="find the emergence point of training runs")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories")
    add_point_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--html", metavar="FILE", help="write trajectory figures to an HTML page")
    p.set_defaults(func=run)


def describe(point) -> str:
    """One human line per run."""
    name = point.model
    if not point.transition:
        return f"{name}: no transition ({point.reason})"
    text = (
        f"{name}: {point.metric} emerges at ~{point.updates:,.0f} updates / "
        f"{point.tokens:,.0f} tokens (between checkpoints at {point.tokens_low:,.0f} and "
        f"{point.tokens_high:,.0f} tokens)"
    )
    if point.threshold_tokens is not None:
        text += f"; first >= {point.threshold:.3g} at {point.threshold_tokens:,.0f} tokens"
    return text


def run(args) -> int:
    import dataclasses

    from ihprobe.changepoint import emergence, run_shape
    from ihprobe.law import predict_emergence
    from ihprobe.trajectories import trajectory

    kwargs = point_kwargs(args)
    metric, reduce, threshold = kwargs.pop("metric"), kwargs.pop("reduce"), kwargs.pop("threshold")
    metrics = [metric, *(["ar_accuracy"] if args.html and metric != "ar_accuracy" else [])]
    results, sections = [], []
    for run_dir in args.runs:
        table = trajectory(run_dir, metrics, **kwargs)
        batch_size, context = run_shape(run_dir)
        point = emergence(table, metric, reduce, threshold, batch_size=batch_size, context=context)
        point = dataclasses.replace(point, model=str(run_dir))
        law = predict_emergence(batch_size, context) if batch_size and context else None
        record = point.to_dict()
        if law is not None:
            record["predicted_updates"] = law.updates
        results.append(record)
        if args.html:
            sections.append(_section(run_dir, table, point, law))
        if not args.json:
            line = describe(point)
            if law is not None:
                line += f"; the law predicts ~{law.updates:,.0f} updates"
            print(line)
    if args.json:
        print(json.dumps(results, indent=2))
    if args.html:
        from ihprobe.report import write_report

        path = write_report(args.html, "ihprobe emergence", sections)
        if not args.json:
            print(f"figures: {path}")
    return 0


def _section(run_dir, table, point, law):
    from ihprobe.figures.emergence import head_strip_figure, trajectory_figure
    from ihprobe.report import Section
    from ihprobe.trajectories import run_losses

    blocks = [describe(point), trajectory_figure(table, point, law, run_losses(run_dir))]
    if table.loc[table["metric"] == point.metric, "layer"].notna().any():
        blocks.append(head_strip_figure(table, point.metric))
    return Section(str(run_dir), blocks)
