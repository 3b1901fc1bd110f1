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

import contextlib
import logging
import time
from collections.abc import Iterator
from contextvars import ContextVar

from ihprobe.core.memory import ANNOUNCE_SECONDS, FLOPS_PER_SECOND, duration

STAGE = {"stage": True}  # ``log.info(..., extra=STAGE)`` marks a record as a stage
_ANNOUNCED: ContextVar[bool] = ContextVar("announced", default=False)  # see announced_work


def is_stage(record: logging.LogRecord) -> bool:
    """Whether ``record`` was logged with ``extra=STAGE``."""
    return bool(getattr(record, "stage", False))


class Counter:
    """Stage records ``"{what} i/n: label, about X s left"`` for a loop over ``total`` items;
    the time left is the mean time of the items done so far times the items still to do. Once
    the first item is done, a loop that will take minutes more says so in a warning (shown
    without any logging set up, in the API as on the command line) with that estimate."""

    def __init__(self, log: logging.Logger, what: str, total: int, announced: bool = False):
        self.log, self.what, self.total = log, what, total
        self.started = time.monotonic()
        # warned before the loop (:func:`announce`): not again after its first item
        self.announced = announced or _ANNOUNCED.get()

    def message(self, index: int, label: str) -> str:
        """The record for starting item ``index`` (1-based)."""
        text = f"{self.what} {index}/{self.total}: {label}"
        if index > 1:
            left = (time.monotonic() - self.started) / (index - 1) * (self.total - index + 1)
            text += f", about {duration(left)} left"
        return text

    def start(self, index: int, label: str) -> None:
        """Log the record for starting item ``index``, and the warning of a long loop when the
        first item is done (:meth:`warning`)."""
        self.log.info(self.message(index, label), extra=STAGE)
        if index == 2 and not self.announced:
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
            f"{self.what}: about {duration(left)} more ({first:.0f} s for the first of "
            f"{self.total}; progress=True shows a bar)"
        )


def rough_seconds(flops: float, device: str = "cpu") -> float:
    """Seconds of ``flops`` floating-point operations at the cautious speed of
    :data:`~ihprobe.core.memory.FLOPS_PER_SECOND` (a small model's overheads make it slower).

    >>> rough_seconds(4e10)
    2.0
    """
    kind = str(device).split(":")[0]
    return flops / FLOPS_PER_SECOND.get(kind, FLOPS_PER_SECOND["cpu"])


def announce(log: logging.Logger, what: str, total: int, seconds_each: float | None) -> bool:
    """Warn before a loop of ``total`` checkpoints estimated at ``seconds_each`` seconds each
    when the whole will take more than :data:`ANNOUNCE_SECONDS` (shown without any logging set
    up, in the API as on the command line); whether it warned. ``None``: no estimate (a hub
    revision not yet fetched), and the loop warns from its first checkpoint's time instead.

    >>> announce(logging.getLogger("ihprobe.x"), "LLC", 21, 80.0)
    True
    >>> announce(logging.getLogger("ihprobe.x"), "scan", 21, 0.5), announce(None, "x", 2, None)
    (False, False)
    """
    if seconds_each is None or total * seconds_each <= ANNOUNCE_SECONDS:
        return False
    log.warning(
        f"{what}: about {duration(total * seconds_each)} of work for {total} "
        f"checkpoint{'s' * (total != 1)} by a rough "
        f"estimate ({seconds_each:.0f} s each, less for any already cached; progress=True "
        "shows a bar)"
    )
    return True


def announce_call(log: logging.Logger, what: str, seconds: float) -> bool:
    """Warn before one call estimated at ``seconds`` when that is more than
    :data:`ANNOUNCE_SECONDS`; whether it warned.

    >>> announce_call(logging.getLogger("ihprobe.x"), "fv_scores", 5.0)
    False
    """
    if seconds <= ANNOUNCE_SECONDS:
        return False
    log.warning(f"{what}: about {duration(seconds)} of work by a rough estimate")
    return True


@contextlib.contextmanager
def announced_work(
    log: logging.Logger, what: str, total: int, seconds_each: float | None
) -> Iterator[bool]:
    """:func:`announce` the work before the block; a loop over checkpoints inside it that was
    announced does not warn again once its first checkpoint is done.

    Example:
        >>> with announced_work(logging.getLogger("ihprobe.x"), "LLC", 2, 1.0) as warned:
        ...     warned
        False
    """
    warned = announce(log, what, total, seconds_each)
    token = _ANNOUNCED.set(warned or _ANNOUNCED.get())
    try:
        yield warned
    finally:
        _ANNOUNCED.reset(token)
