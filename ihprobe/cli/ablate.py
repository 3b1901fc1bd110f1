"""``ihprobe ablate SOURCE...``: top heads (per layer or global) against random baselines.

Writes ``OUT/ablation.csv`` (the long table of :meth:`ihprobe.AblationResult.to_frame`, one block
per checkpoint) and ``OUT/report.html`` (method, head sets, per-metric charts, the numbers; on a
run directory also the signature-vs-load-bearing curve over training). With ``--over-training``
the table is :func:`ihprobe.ablation_trajectory`'s (load-bearing index and per-head effects at
every checkpoint, cached by weights hash) and the report shows them over training.

    ihprobe ablate runs/demo --out ablation/demo --metrics ar_accuracy,induction_loss
    ihprobe ablate path/to/checkpoint --scope global --top 1 --baseline score-matched
    ihprobe ablate runs/demo --over-training --scope global --top 1 --mode pattern
"""

from __future__ import annotations

from ihprobe.causal.choices import BASELINES, MODES, SCOPES  # torch-free
from ihprobe.cli._common import add_quiet, any_int, fraction_or_count, positive_int, progress


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ablate", help="ablate the top heads per layer vs random heads; CSV + HTML report"
    )
    p.add_argument(
        "sources", nargs="+", metavar="SOURCE", help="checkpoint, run directory or hub id"
    )
    p.add_argument("--revision", action="append", default=None, help="hub revision (repeatable)")
    p.add_argument("--out", default="ablation", help="output directory")
    p.add_argument("--by", default="prefix_matching", help="head score that ranks heads")
    p.add_argument(
        "--top", type=fraction_or_count, default=0.02,
        help="fraction of heads (0.02) or a count (1) in the top set",
    )  # fmt: skip
    p.add_argument("--scope", choices=SCOPES, default="layer", help="layer ([B]'s) or global top")
    p.add_argument("--random", type=positive_int, default=20, help="random draws")
    p.add_argument("--baseline", choices=BASELINES, default="layer-matched", help="random heads")
    p.add_argument("--mode", choices=MODES, default="mean", help="what ablated heads output")
    p.add_argument(
        "--over-training", action="store_true",
        help="every checkpoint of a run: load-bearing index and per-head effects over training",
    )  # fmt: skip
    p.add_argument("--metrics", help="comma-separated metrics (default: all the model can run)")
    p.add_argument("--seed", type=any_int, default=0, help="seed of probe inputs and random draws")
    p.add_argument("--n", type=positive_int, help="half-length of the repeated tokens")
    p.add_argument("--batch", type=positive_int, default=100, help="repeated-token rows")
    p.add_argument("--bos", action="store_true", help="prepend the tokenizer's BOS to probe rows")
    p.add_argument("--text", help="text file for the ICL score and natural loss")
    p.add_argument("--task", action="append", default=None, help="task file of (x, y) pairs")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import pandas as pd

    from ihprobe.causal.ablation import check_settings
    from ihprobe.cli._common import read_text_option, refuse_overwrite
    from ihprobe.core.errors import IhprobeError
    from ihprobe.core.files import atomic_write
    from ihprobe.dynamics.trajectories import ablate_checkpoints
    from ihprobe.figures.ablation import write_ablation_report
    from ihprobe.io.sources import sources_of
    from ihprobe.probes.battery import HEAD_METRICS

    metrics = args.metrics.split(",") if args.metrics else None
    check_settings(top=args.top, random=args.random, mode=args.mode, metrics=metrics,
                   scope=args.scope, baseline=args.baseline)  # fmt: skip
    if args.by not in HEAD_METRICS:
        raise IhprobeError(
            f"unknown head score --by {args.by}; choose one of {list(HEAD_METRICS)}."
        )
    out = Path(args.out)
    targets = [out / "ablation.csv", out / "report.html"]
    refuse_overwrite(targets, args.force)
    kwargs = {
        "by": args.by, "top": args.top, "scope": args.scope, "random": args.random,
        "baseline": args.baseline, "mode": args.mode, "metrics": metrics, "seed": args.seed,
        "n": args.n, "batch": args.batch, "bos": args.bos,
        "text": read_text_option(args.text), "tasks": args.task,
    }  # fmt: skip
    if args.over_training:
        return _over_training(args, kwargs, targets)
    results = [
        result
        for source in args.sources  # one skeleton per source
        for result in ablate_checkpoints(
            sources_of(source, args.revision or None), progress=progress(args), **kwargs
        )
    ]
    frame = pd.concat([r.to_frame() for r in results], ignore_index=True)
    atomic_write(targets[0], lambda tmp: frame.to_csv(tmp, index=False))
    write_ablation_report(targets[1], results)
    for result in results:
        _print_summary(result)
    print(f"wrote {targets[0]} ({len(frame)} rows) and {targets[1]}")
    return 0


def _over_training(args, kwargs: dict, targets) -> int:
    """``--over-training``: ablation_trajectory, its table and the over-training report."""
    from ihprobe.core.files import atomic_write
    from ihprobe.dynamics.ablation_series import ablation_trajectory
    from ihprobe.figures.ablation import write_trajectory_report

    table = ablation_trajectory(
        args.sources, revisions=args.revision or None, progress=progress(args), **kwargs
    )
    atomic_write(targets[0], lambda tmp: table.to_csv(tmp, index=False))
    write_trajectory_report(targets[1], table, by=args.by)
    print(f"wrote {targets[0]} ({len(table)} rows) and {targets[1]}")
    return 0


def _print_summary(result) -> None:
    top = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
    where = f" step {result.step}" if result.step is not None else ""
    print(f"{result.model_name}{where}: top set {top}")
    for row in result.summary().itertuples():
        if ":" not in row.metric:
            print(
                f"  {row.metric}: clean {row.clean:.4g}, top change {row.change:+.3g}, "
                f"random {row.random_change_mean:+.3g} [{row.random_change_lo:+.3g}, "
                f"{row.random_change_hi:+.3g}], p {row.p_value:.3g}, load-bearing index "
                f"{row.load_bearing_index:.3g} [{row.load_bearing_lo:.3g}, "
                f"{row.load_bearing_hi:.3g}]"
            )
    print(f"  verdict: {result.verdict()}")
