"""Helpers that several subcommands share (not a subcommand: the name starts with '_').

The argument types here are the one validation layer for command-line values: each refuses
0, negatives, NaN, inf or a wrong type where they make no sense, so argparse exits with status 2
and one line before any work starts.

>>> positive_int("3"), fraction("0.5"), key_value("repetition=0.9")
(3, 0.5, ('repetition', 0.9))
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import check_writable_dir, check_writable_file


def add_source(p: argparse.ArgumentParser, out: str) -> None:
    """SOURCE, ``--revision`` and ``--out`` of a command that reads one checkpoint."""
    p.add_argument("source", metavar="SOURCE", help="checkpoint directory or hub id")
    p.add_argument("--revision", help="hub revision")
    p.add_argument("--out", default=out, help="output directory")


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet``: no progress bars (without it, bars on stderr when it is a terminal)."""
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def progress(args: argparse.Namespace) -> bool | None:
    """The ``progress`` argument for the library: None (a bar on a terminal) or False."""
    return False if args.quiet else None


class DefaultsFormatter(argparse.HelpFormatter):
    """Adds ``(default: X)`` to every option that has a real default and does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default is not None and action.default is not False
        if "default" in text or not shown or action.default in (argparse.SUPPRESS, []):
            return text
        if not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _number(kind: type, test: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    """An argparse type: ``kind(text)``, finite, and passing ``test``."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not math.isfinite(value) or not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # argparse names the type in some messages
    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
any_int = _number(int, lambda v: True, "an integer")
positive_float = _number(float, lambda v: v > 0, "a positive number")
nonnegative_float = _number(float, lambda v: v >= 0, "a number >= 0")
finite_float = _number(float, lambda v: True, "a finite number")
fraction = _number(float, lambda v: 0 < v <= 1, "a fraction in (0, 1]")
probability = _number(float, lambda v: 0 <= v <= 1, "a probability in [0, 1]")
warmup_fraction = _number(float, lambda v: 0 <= v < 1, "a fraction in [0, 1)")


def fraction_or_count(text: str) -> float | int:
    """A count k >= 1 when written as an integer ("1"), else a fraction in (0, 1] ("0.02").

    >>> fraction_or_count("1"), fraction_or_count("0.02")
    (1, 0.02)
    """
    try:
        return positive_int(text) if text.strip().isdigit() else fraction(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a fraction in (0, 1] nor a count k >= 1"
        ) from None


def device(text: str) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    kind, sep, index = text.partition(":")
    if text == "auto" or (kind in ("cpu", "cuda") and (not sep or index.isdigit())):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a device: use auto, cpu, cuda or cuda:N")


def key_value(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, JSON value or the string); the one parser of ``--option``.

    Example:
        >>> key_value("period=[8, 32]")
        ('period', [8, 32])
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. repetition=0.9")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise argparse.ArgumentTypeError(f"{text!r}: the value must be a finite number")
    return key.strip().replace("-", "_"), parsed


def add_option_flag(parser, what: str = "producer option") -> None:
    """``--option KEY=VALUE`` (repeatable), the one flag for producer options."""
    parser.add_argument(
        "--option",
        dest="option",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help=f"{what}, repeatable; VALUE is read as JSON when it parses (--option period=[8,32])",
    )


def refuse_overwrite(targets: list[Path], force: bool) -> None:
    """Raise unless none of ``targets`` exists or ``force`` was given; and unless every target
    can be written (checked before any work starts)."""
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise IhprobeError(
            f"{', '.join(existing)} already exist; pass --force to overwrite or another --out."
        )
    for target in targets:
        check_writable_dir(target.parent)
        check_writable_file(target)


def read_text_option(path: str | None) -> str | None:
    """The contents of a ``--text FILE`` option, or None when it was not given."""
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise IhprobeError(f"--text {path} is not UTF-8 text; pass a plain text file.") from None
    except OSError as err:
        raise IhprobeError(f"cannot read --text {path}: {err.strerror}.") from err
