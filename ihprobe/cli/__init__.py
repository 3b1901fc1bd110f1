"""The ``ihprobe`` command: one subcommand per module in this package, each a thin call into
the library.

A subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func=run``; it imports heavy libraries inside ``run`` so that ``ihprobe --help`` stays fast.
Errors the user can fix (:class:`~ihprobe.errors.IhprobeError`) print one line and exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from ihprobe.errors import IhprobeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ihprobe",
        description="Find, time and test induction heads in language models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except IhprobeError as err:
        print(f"ihprobe {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
