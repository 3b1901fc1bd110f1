"""The research command lines' grammar, the same as ``ihprobe``'s: a bad flag or a degenerate
number (0 draws, 0 steps) is one line, ``PROG: error: ... (see PROG --help)``, and exit status
2, before anything runs or is written; never argparse's usage block or a traceback.

>>> parser = OneLineParser(prog="python -m lab.studies demo")
>>> _ = parser.add_argument("--steps", type=positive_int)
>>> parser.parse_args(["--steps", "8"]).steps
8
>>> positive_int("0")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: '0' is not a whole number above 0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """A whole number above 0 (draws, steps, checkpoints, widths): 0, -1, 1.5 and nan refused."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return value


def quietly(main: Callable[[], int | None]) -> int:
    """``main()``'s exit status; when the reader of its output leaves (``--list | head``), it
    ends quietly, as ``ihprobe`` does (status 141, no BrokenPipeError)."""
    try:
        code = int(main() or 0)
        sys.stdout.flush()  # here, where a reader that left is caught, not at exit
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141
