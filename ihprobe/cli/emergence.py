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
    from ihprobe.changepoint import run_emergence
    from ihprobe.law import predict_emergence

    results = []
    for run_dir in args.runs:
        point = run_emergence(run_dir, **point_kwargs(args))
        record = point.to_dict()
        if point.batch_size and point.context:
            law = predict_emergence(point.batch_size, point.context)
            record["predicted_updates"] = law.updates
        results.append(record)
        if not args.json:
            line = describe(point)
            if "predicted_updates" in record:
                line += f"; the law predicts ~{record['predicted_updates']:,.0f} updates"
            print(line)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0
