"""The ``ihprobe`` command: one subcommand per module in this package, each a thin call into
the library.

A subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func=run``; it imports heavy libraries inside ``run`` so that ``ihprobe --help`` stays fast.
Errors the user can fix (:class:`~ihprobe.core.errors.IhprobeError`, or a bad flag value) print one
line and exit with 2. Every subcommand takes its flags from :mod:`ihprobe.cli._common` (one name per
thing), accepts no abbreviated flags, and prints stage lines when stderr is not a terminal
(:mod:`ihprobe.cli._stages`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import pkgutil
import sys
import warnings
from collections.abc import Iterator

from ihprobe import __version__
from ihprobe.cli._common import DefaultsFormatter
from ihprobe.cli._stages import stage_lines
from ihprobe.core.errors import IhprobeError


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        kwargs.setdefault("allow_abbrev", False)  # `--n` is never taken for `--no-cache`
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ihprobe",
        description="Find, time and test induction heads in language models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument("--version", action="version", version=f"ihprobe {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser
    )
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}").register(subparsers)
    parser.commands = subparsers.choices  # name -> its parser, for errors that name it
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The parsed arguments; a flag the subcommand does not take is refused by the
    subcommand's own parser, so the line points to ``ihprobe COMMAND --help``."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


@contextlib.contextmanager
def _threads(args: argparse.Namespace) -> Iterator[None]:
    """The command runs with ``--threads`` torch threads, when it takes the flag. Where torch
    is not imported yet (a fresh ``ihprobe`` process), torch takes them from
    ``OMP_NUM_THREADS`` when the command imports it, so a refusal before any heavy import stays
    free of torch."""
    if getattr(args, "threads", None) is None:
        yield
        return
    if "torch" not in sys.modules:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        yield
        return
    from ihprobe.core.threads import torch_threads

    with torch_threads(args.threads):
        yield


def _one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning on the command line: ``WARNING message``, without the source line."""
    print(f"WARNING {message}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as done:  # --help (0) or a bad flag (2, one line already printed)
        return int(done.code or 0)
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:  # stage lines lower ihprobe's level, not these
        if type(handler) is logging.StreamHandler:
            handler.setLevel(level)
    try:
        quiet = getattr(args, "quiet", False) or getattr(args, "progress", True) is False
        with (
            stage_lines(args.command, enabled=False if quiet else None),
            _threads(args),
            warnings.catch_warnings(),  # a warning is one line, like the logged ones
        ):
            warnings.showwarning = _one_line
            return int(args.func(args) or 0)
    except IhprobeError as err:
        print(f"ihprobe {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ihprobe scan ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # 128 + SIGPIPE, as a shell reports a process a pipe stopped
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        print(
            f"ihprobe {args.command}: error: disk full ({err}); free space and run again.",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
