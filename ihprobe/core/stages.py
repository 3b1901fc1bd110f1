"""Stage records: a library log record marked as a stage ("scan 3/20: step-000300, about 40 s
left") is what the command line shows on stderr every few seconds when stderr is not a terminal
(``ihprobe/cli/_stages.py``); the library itself never prints. Off a terminal, a long API call
(``trajectory``, ``ablation_trajectory``, ``loss_by_position_trajectory``) reports through these
records: ``logging.basicConfig(level=logging.INFO)`` shows them.

>>> logging.getLogger("ihprobe.x").info("scan %d/%d", 3, 20, extra=STAGE)
>>> counter = Counter(logging.getLogger("ihprobe.x"), "scan", total=20)
>>> counter.message(1, "step-000000")
'scan 1/20: step-000000'
"""

from __future__ import annotations

import logging
import time

from ihprobe.core.memory import ANNOUNCE_SECONDS

STAGE = {"stage": True}  # ``log.info(..., extra=STAGE)`` marks a record as a stage


def is_stage(record: logging.LogRecord) -> bool:
    """Whether ``record`` was logged with ``extra=STAGE``."""
    return bool(getattr(record, "stage", False))


class Counter:
    """Stage records ``"{what} i/n: label, about X s left"`` for a loop over ``total`` items;
    the time left is the mean time of the items done so far times the items still to do. Once
    the first item is done, a loop that will take minutes more says so in a warning (shown
    without any logging set up, in the API as on the command line) with that estimate."""

    def __init__(self, log: logging.Logger, what: str, total: int):
        self.log, self.what, self.total = log, what, total
        self.started = time.monotonic()

    def message(self, index: int, label: str) -> str:
        """The record for starting item ``index`` (1-based)."""
        text = f"{self.what} {index}/{self.total}: {label}"
        if index > 1:
            left = (time.monotonic() - self.started) / (index - 1) * (self.total - index + 1)
            text += f", about {left:.0f} s left"
        return text

    def start(self, index: int, label: str) -> None:
        """Log the record for starting item ``index``, and the warning of a long loop when the
        first item is done (:meth:`warning`)."""
        self.log.info(self.message(index, label), extra=STAGE)
        if index == 2:
            found = self.warning(time.monotonic() - self.started)
            if found:
                self.log.warning(found)

    def warning(self, first: float) -> str | None:
        """The warning when ``total - 1`` more items of ``first`` seconds each take more than
        :data:`ANNOUNCE_SECONDS`; None otherwise.

        >>> Counter(logging.getLogger("ihprobe.x"), "LLC", total=4).warning(150.0)
        'LLC: about 8 min more (150 s for the first of 4; progress=True shows a bar)'
        >>> Counter(logging.getLogger("ihprobe.x"), "scan", total=4).warning(2.0) is None
        True
        """
        left = first * (self.total - 1)
        if left <= ANNOUNCE_SECONDS:
            return None
        return (
            f"{self.what}: about {left / 60:.0f} min more ({first:.0f} s for the first of "
            f"{self.total}; progress=True shows a bar)"
        )
