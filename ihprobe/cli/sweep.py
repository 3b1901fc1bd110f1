"""``ihprobe sweep --out DIR --grid batch_size=4,8,16 --grid context=32,64 [-- TRAIN FLAGS]``.

Trains every grid point as its own ``ihprobe train`` process (finished runs are skipped,
interrupted ones resumed), finds each run's emergence point and writes ``DIR/sweep.csv``,
``DIR/law.json`` (when B and C vary) and ``DIR/sweep.html`` (law fit; frontier map when
``repetition`` and ``reliability`` vary). Flags after ``--`` go to every ``ihprobe train``.

``--per-device K`` trains K runs at once on each device of this machine (every GPU, else the
CPU), each told its ``--device``: K small runs fill one GPU (``lab/benchmarks/device_job.py``
measures the aggregate tokens/s at several K).

``--launcher slurm`` submits each unfinished run as a Slurm job through submitit
(``pip install 'ihprobe[cluster]'``), waits for them and reports the same way; a run with
``--gpus-per-run`` above 1 trains under torchrun. Rerunning resubmits only unfinished runs.
"""

from __future__ import annotations

import contextlib
import logging

from ihprobe.cli import _common as flags
from ihprobe.cli.emergence import add_point_options, point_kwargs
from ihprobe.core.errors import IhprobeError

SLURM_FLAGS = {"partition": "--partition", "time": "--time", "gpus_per_run": "--gpus-per-run"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="train a grid of runs, then fit the law / map the frontier"
    )
    p.add_argument("--out", required=True, help="sweep directory")
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="TrainConfig field or producer option and values",
    )
    p.add_argument(
        "--jobs", type=flags.positive_int, default=1, help="runs trained at once (local)"
    )
    p.add_argument(
        "--per-device",
        dest="per_device",
        type=flags.positive_int,
        metavar="K",
        help="K runs at once on each device (every GPU, else the CPU), each given its --device; "
        "local, instead of --jobs (default: none, --jobs decides)",
    )
    p.add_argument(
        "--launcher",
        choices=("local", "slurm"),
        default="local",
        help="train runs as local processes or as Slurm jobs through submitit",
    )
    p.add_argument(
        "--partition", help="Slurm partition, with --launcher slurm (default: the cluster's)"
    )
    p.add_argument(
        "--time",
        type=flags.positive_int,
        metavar="MINUTES",
        help="time limit of each run's job, with --launcher slurm (default 60)",
    )
    p.add_argument(
        "--gpus-per-run",
        type=flags.nonnegative_int,
        help="GPUs of each run's job, above 1 a torchrun job; with --launcher slurm (default 1)",
    )
    p.add_argument(
        "--no-train",
        dest="train",
        action="store_false",
        help="only summarise the runs already there",
    )
    add_point_options(p)
    flags.add_quiet(p, "no stage lines")
    p.add_argument(
        "train_args",
        nargs="*",
        metavar="-- TRAIN FLAGS",
        help="flags passed to every ihprobe train",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.jobs.sweep import run_sweep

    if args.train:
        check_grid(args.grid, args.out, tuple(args.train_args), local=args.launcher == "local")
    written, failed = run_sweep(
        args.grid,
        args.out,
        train_args=tuple(args.train_args),
        jobs=args.jobs,
        per_device=args.per_device,
        train=args.train,
        slurm=slurm_of(args),
        **point_kwargs(args),
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    for name, why in failed.items():
        print(f"failed: {name} ({why}); see {args.out}/runs/{name}.log")
    return 1 if failed else 0


def check_grid(grid: list[str], out: str, train_args: tuple[str, ...], local: bool = True) -> None:
    """Every grid point parsed and checked as the ``ihprobe train`` it will run (flags, the
    TrainConfig and its memory estimate, the producer's options and, trained here, the device),
    so that a bad value is one line before any run starts.
    """
    from ihprobe.cli import build_parser
    from ihprobe.jobs.sweep import plan

    parser = build_parser()
    with held_warnings():  # a refused grid prints its one line and nothing before it
        _check_points(parser, plan(grid, out), train_args, local)


def _check_points(parser, runs, train_args: tuple[str, ...], local: bool) -> None:
    import contextlib
    import io

    from ihprobe.cli.train import config_from_args
    from ihprobe.core.world import resolve_device
    from ihprobe.data.registry import producer_options
    from ihprobe.training.config import check_config, check_training_size

    for run in runs:
        command = run.train_command(train_args)
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                args = parser.parse_args(command[command.index("train") :])
            config = config_from_args(args)
            check_config(config)
            check_training_size(config)
            producer_options(config.producer, config.producer_options)
            if local:  # a cluster job's device is the node's, not this machine's
                resolve_device(config.device)
            check_fit(config)
        except SystemExit:
            reason = said.getvalue().strip().split(": error: ")[-1].split(" (see ")[0]
            raise IhprobeError(f"grid point {run.name}: {reason}") from None
        except IhprobeError as err:
            raise IhprobeError(f"grid point {run.name}: {err}") from None


@contextlib.contextmanager
def held_warnings():
    """Hold ihprobe's log records while the block runs; give them to the usual handlers only
    when it succeeds (a work estimate's warning, then a refusal, read as two verdicts)."""
    logger, held = logging.getLogger("ihprobe"), []
    handler = logging.Handler()
    handler.emit = held.append
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    for record in held:  # reached only when the block raised nothing
        logger.handle(record)


def check_fit(config) -> None:
    """Refuse a run with too few checkpoints for the change-point fit each run gets after
    training (``emergence``: 3 segments need 6 checkpoints past step 0), counted as the trainer
    will save them: points of a short run that round to one update are saved once."""
    import inspect

    from ihprobe.dynamics.changepoint import emergence
    from ihprobe.training.schedule import checkpoint_steps

    need = 2 * inspect.signature(emergence).parameters["segments"].default
    steps = checkpoint_steps(
        config.checkpoints,
        total=config.total_steps,
        tokens_per_update=config.tokens_per_update,
        n=config.n_checkpoints,
    )
    saved = len(steps) - 1  # past step 0
    if saved < need:
        asked = config.n_checkpoints if isinstance(config.checkpoints, str) else saved
        merged = f" ({asked} asked: some round to one update)" if asked > saved else ""
        raise IhprobeError(
            f"{saved} checkpoint(s) past step 0{merged} are too few for the change-point fit "
            f"of each run (need {need}); pass --n-checkpoints {need} or more, and enough --steps "
            "to hold them, after --."
        )


def slurm_of(args):
    """The :class:`~ihprobe.jobs.cluster.Slurm` settings of ``--launcher slurm``, else None."""
    from ihprobe.jobs.cluster import Slurm

    given = [flag for key, flag in SLURM_FLAGS.items() if getattr(args, key) is not None]
    if args.per_device is not None and (args.launcher != "local" or args.jobs != 1):
        raise IhprobeError(
            "--per-device sets how many runs train at once: drop --jobs and use --launcher local."
        )
    if args.launcher == "local":
        if given:
            raise IhprobeError(f"{given[0]} is for --launcher slurm; add it or drop {given[0]}.")
        return None
    settings = {
        "partition": args.partition,
        "time_min": args.time,
        "gpus_per_run": args.gpus_per_run,
    }
    return Slurm(**{k: v for k, v in settings.items() if v is not None})
