"""``ihprobe demo``: train a tiny model, find its induction heads' emergence, ablate, report."""

from __future__ import annotations

from ihprobe.cli import _common as flags


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="train a tiny model, watch induction heads emerge, ablate them, write a report",
        description="The main job end to end on CPU in about a minute (see README).",
    )
    flags.add_out(p, "runs/demo")
    p.add_argument("--steps", type=flags.positive_int, help="training updates (default: 500)")
    flags.add_draws(p, "random draws of the ablation baseline", "DemoConfig's")
    flags.add_threads(p)
    flags.add_seed(p, "seed of training and probes")
    p.add_argument(
        "--compare",
        action="store_true",
        help="also train natural-only and Bi-Induct variants at matched compute",
    )
    p.add_argument("--no-progress", action="store_true", help="stage lines only, no progress bars")
    flags.add_quiet(p, "only the final summary")
    p.set_defaults(func=run)


def run(args) -> int:
    import logging
    import sys
    from dataclasses import replace

    from ihprobe.jobs.demo import DemoConfig, run_demo
    from ihprobe.jobs.demo_summary import summary_text

    if not args.quiet:  # one line per stage on stderr, beside the progress bars
        stages = logging.getLogger("ihprobe.jobs.demo")
        stages.setLevel(logging.INFO)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("demo: %(message)s"))
        stages.addHandler(handler)  # the records still reach the stage lines ("4/4 ablating")
    config = DemoConfig(
        out=args.out,
        seed=args.seed,
        compare=args.compare,
        progress=not (args.no_progress or args.quiet),
    )
    if args.steps is not None:
        config = replace(config, steps=args.steps)
    config = replace(config, threads=args.threads)
    if args.draws is not None:
        config = replace(config, random=args.draws)
    result = run_demo(config)
    print(summary_text(result))
    return 0
