"""``ihprobe sweep --out DIR --grid batch_size=4,8,16 --grid context=32,64 [-- TRAIN FLAGS]``.

Trains every grid point as its own ``ihprobe train`` process (finished runs are skipped,
interrupted ones resumed), finds each run's emergence point and writes ``DIR/sweep.csv``,
``DIR/law.json`` (when B and C vary) and ``DIR/sweep.html`` (law fit; frontier map when
``repetition`` and ``reliability`` vary). Flags after ``--`` go to every ``ihprobe train``.
"""

from __future__ import annotations

from ihprobe.cli._common import positive_int
from ihprobe.cli.emergence import add_point_options, point_kwargs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="train a grid of runs, then fit the law / map the frontier"
    )
    p.add_argument("--out", required=True, help="sweep directory")
    p.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2,...",
                   help="TrainConfig field or producer option and values")  # fmt: skip
    p.add_argument("--jobs", type=positive_int, default=1, help="runs trained at once")
    p.add_argument("--no-train", dest="train", action="store_false",
                   help="only summarise the runs already there")  # fmt: skip
    add_point_options(p)
    p.add_argument("train_args", nargs="*", metavar="-- TRAIN FLAGS",
                   help="flags passed to every ihprobe train")  # fmt: skip
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.sweep import run_sweep

    written, failed = run_sweep(
        args.grid, args.out, train_args=tuple(args.train_args), jobs=args.jobs,
        train=args.train, **point_kwargs(args),
    )  # fmt: skip
    for name, path in written.items():
        print(f"{name}: {path}")
    for name, code in failed.items():
        print(f"failed: {name} (exit {code}); see {args.out}/runs/{name}.log")
    return 1 if failed else 0
