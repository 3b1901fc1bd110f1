"""``ihprobe ablate SOURCE...``: top heads per layer against random baselines, with a report.

Writes ``OUT/ablation.csv`` (the long table of :meth:`ihprobe.AblationResult.to_frame`, one block
per checkpoint) and ``OUT/report.html`` (method, head sets, per-metric charts, the numbers; on a
run directory also the signature-vs-load-bearing curve over training).

    ihprobe ablate runs/demo --out ablation/demo --metrics ar_accuracy,induction_loss
    ihprobe ablate path/to/checkpoint --by logit_attribution --random 50 --mode zero
"""

from __future__ import annotations

from ihprobe.cli._common import any_int, fraction, positive_int


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
    p.add_argument("--top", type=fraction, default=0.02, help="fraction of heads per layer")
    p.add_argument("--random", type=positive_int, default=20, help="random draws")
    p.add_argument("--mode", choices=("mean", "zero"), default="mean", help="ablation kind")
    p.add_argument("--metrics", help="comma-separated metrics (default: all the model can run)")
    p.add_argument("--seed", type=any_int, default=0, help="seed of probe inputs and random draws")
    p.add_argument("--n", type=positive_int, help="half-length of the repeated tokens")
    p.add_argument("--batch", type=positive_int, default=100, help="repeated-token rows")
    p.add_argument("--bos", action="store_true", help="prepend the tokenizer's BOS to probe rows")
    p.add_argument("--text", help="text file for the ICL score and natural loss")
    p.add_argument("--task", action="append", default=None, help="task file of (x, y) pairs")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import pandas as pd

    from ihprobe.ablation import check_settings
    from ihprobe.cli._common import read_text_option, refuse_overwrite
    from ihprobe.errors import IhprobeError
    from ihprobe.figures.ablation import write_ablation_report
    from ihprobe.files import atomic_write
    from ihprobe.probes.battery import HEAD_METRICS
    from ihprobe.trajectories import ablate_checkpoints, sources_of

    metrics = args.metrics.split(",") if args.metrics else None
    check_settings(top=args.top, random=args.random, mode=args.mode, metrics=metrics)
    if args.by not in HEAD_METRICS:
        raise IhprobeError(
            f"unknown head score --by {args.by}; choose one of {list(HEAD_METRICS)}."
        )
    out = Path(args.out)
    targets = [out / "ablation.csv", out / "report.html"]
    refuse_overwrite(targets, args.force)
    kwargs = {
        "by": args.by, "top": args.top, "random": args.random, "mode": args.mode,
        "metrics": metrics, "seed": args.seed, "n": args.n, "batch": args.batch, "bos": args.bos,
        "text": read_text_option(args.text), "tasks": args.task,
    }  # fmt: skip
    results = [
        result
        for source in args.sources  # one skeleton per source
        for result in ablate_checkpoints(
            sources_of(source, args.revision or None), progress=None, **kwargs
        )
    ]
    frame = pd.concat([r.to_frame() for r in results], ignore_index=True)
    atomic_write(targets[0], lambda tmp: frame.to_csv(tmp, index=False))
    write_ablation_report(targets[1], results)
    for result in results:
        _print_summary(result)
    print(f"wrote {targets[0]} ({len(frame)} rows) and {targets[1]}")
    return 0


def _print_summary(result) -> None:
    top = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
    where = f" step {result.step}" if result.step is not None else ""
    print(f"{result.model_name}{where}: top set {top}")
    for row in result.summary().itertuples():
        if ":" not in row.metric:
            print(
                f"  {row.metric}: clean {row.clean:.4g}, top drop {row.top_drop:+.3g}, "
                f"random {row.random_drop_mean:+.3g} [{row.random_drop_lo:+.3g}, "
                f"{row.random_drop_hi:+.3g}], p {row.p_value:.3g}"
            )
