"""The suite form of SOURCE (not a subcommand: the name starts with '_'): ``--suite NAME``
names a public checkpoint suite instead of SOURCE arguments, with the suite's options as
``--suite-option KEY=VALUE`` (repeatable, read as ``--option`` is), ``--steps`` and
``--every``. :func:`add_sources_or_suite` adds them beside SOURCE
(:func:`ihprobe.cli._common.add_sources`), so every command that reads a series spells them the
same; :func:`suite_of` lists the checkpoints they name, offline
(:func:`ihprobe.io.suites.suite_checkpoints`).

    ihprobe scan --suite pythia --suite-option size=160m --every 10 --out scans/pythia-160m
    ihprobe weight-trajectory --suite olmo --suite-option size=1B

>>> from ihprobe.io.runs import Checkpoint
>>> steps("0,1000,143000"), [c.step for c in every([Checkpoint("a", step=s) for s in range(5)], 3)]
([0, 1000, 143000], [0, 3, 4])
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ihprobe.cli import _common as flags
from ihprobe.core.errors import IhprobeError

if TYPE_CHECKING:  # the CLI imports the library lazily, so that --help starts fast
    from ihprobe.io.runs import Checkpoint


class _SuiteNames:
    """The suites of :data:`ihprobe.io.suite_table.SUITES`, looked up when the help is printed."""

    def __str__(self) -> str:
        from ihprobe.io.suite_table import SUITES

        return ", ".join(SUITES)


def steps(text: str) -> list[int]:
    """``--steps``: comma-separated training steps, each an integer >= 0."""
    try:
        return [flags.nonnegative_int(part.strip()) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not comma-separated steps >= 0, e.g. 0,1000,143000"
        ) from None


def add_sources_or_suite(p: argparse.ArgumentParser, *, out: str | None) -> None:
    """SOURCE... (:func:`ihprobe.cli._common.add_sources`, with ``out``) or ``--suite NAME``
    with ``--suite-option``, ``--steps`` and ``--every``."""
    flags.add_sources(p, out=out, suite=True)
    suite = p.add_argument(
        "--suite",
        metavar="NAME",
        help="a public checkpoint suite instead of SOURCE: %(names)s (default: none)",
    )
    suite.names = _SuiteNames()  # read from the suite table only when --help is shown
    p.add_argument(
        "--suite-option",
        dest="suite_option",
        action="append",
        type=flags.key_value,
        default=[],
        metavar="KEY=VALUE",
        help="an option of the --suite, repeatable: size=160m, deduped=true, seed=3, model=..., "
        "stage=2 (default: each option's first value in ihprobe.io.suites.SUITES, e.g. pythia "
        "size=160m)",
    )
    p.add_argument(
        "--steps",
        type=steps,
        help="only these steps of the --suite, comma-separated (default: all)",
    )
    p.add_argument(
        "--every",
        type=flags.positive_int,
        metavar="N",
        help="every N-th checkpoint of the --suite from the first, and its last (default: 1)",
    )


def every(ckpts: list[Checkpoint], n: int | None) -> list[Checkpoint]:
    """Every ``n``-th checkpoint from the first, and the last (the end of training) always."""
    if not n or n == 1:
        return ckpts
    chosen = ckpts[::n]
    return chosen if chosen[-1] is ckpts[-1] else [*chosen, ckpts[-1]]


def suite_of(args: argparse.Namespace) -> list[Checkpoint] | None:
    """The checkpoints ``--suite`` names (None without it), after checking that the flags go
    together: SOURCE or ``--suite``, not both; the suite's flags only with ``--suite``."""
    sources = getattr(args, "sources", None) or []
    given = [
        flag
        for flag, value in (
            ("--suite-option", args.suite_option),
            ("--steps", args.steps),
            ("--every", args.every),
        )
        if value
    ]
    if args.suite is None:
        if given:
            raise IhprobeError(f"{given[0]} is an option of --suite NAME; add --suite.")
        if not sources:
            raise IhprobeError(
                "pass a SOURCE (checkpoint, run directory or hub id) or --suite NAME."
            )
        return None
    if sources:
        raise IhprobeError(f"pass SOURCE ({sources[0]}) or --suite {args.suite}, not both.")
    if getattr(args, "revision", None):
        raise IhprobeError("--revision picks revisions of a SOURCE; with --suite pass --steps.")
    from ihprobe.io.suites import SUITES, suite_checkpoints

    if args.suite in SUITES and SUITES[args.suite].kind == "files":
        raise IhprobeError(
            f"{args.suite} is listed (ihprobe.suite_checkpoints) but not loadable: its files are "
            "the authors' own state dicts, with no config.json."
        )
    options = dict(args.suite_option)
    if {"name", "steps"} & set(options):
        raise IhprobeError("--suite-option names an option of the suite; pass steps as --steps.")
    found = suite_checkpoints(args.suite, steps=args.steps, **options)
    return every(found, args.every)
