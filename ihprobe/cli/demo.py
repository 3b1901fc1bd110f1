"""``ihprobe demo``: train a tiny model, find its induction heads' emergence, ablate, report."""

from __future__ import annotations

from ihprobe.cli._common import any_int, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="train a tiny model, watch induction heads emerge, ablate them, write a report",
        description="The main job end to end on CPU in a few minutes (see README).",
    )
    p.add_argument("--out", default="runs/demo", help="output directory")
    p.add_argument("--steps", type=positive_int, help="training updates (default 2000)")
    p.add_argument(
        "--random", type=positive_int, help="random draws of the ablation baseline (default 20)"
    )
    p.add_argument("--seed", type=any_int, default=0, help="seed of training and probes")
    p.add_argument(
        "--compare",
        action="store_true",
        help="also train natural-only and Bi-Induct variants at matched compute",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args) -> int:
    from dataclasses import replace

    from ihprobe.demo import DemoConfig, run_demo

    config = DemoConfig(out=args.out, seed=args.seed, compare=args.compare,
                        progress=not args.no_progress)  # fmt: skip
    if args.steps is not None:
        config = replace(config, steps=args.steps)
    if args.random is not None:
        config = replace(config, random=args.random)
    result = run_demo(config)
    print(result.summary.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\nreport:  {result.report}")
    for name, path in result.tables.items():
        print(f"{name + ':':<22} {path}")
    return 0
