"""Stage lines: when stderr is not a terminal (a log file, a CI job), a command that runs long
prints a first line after :data:`FIRST_S` seconds, then one at least every :data:`EVERY_S`
seconds, saying how long it has run and what the
library last reported (its ``ihprobe.*`` INFO records marked as stages, :mod:`ihprobe.core.stages`:
"scan 3/20: step-000300"; else its latest INFO record), so that a
silent minute is never mistaken for a hang. On a terminal the progress bars do that job.

>>> with stage_lines("scan", enabled=False):
...     pass
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator

from ihprobe.core.stages import STAGE, is_stage

FIRST_S = 5.0  # the first line, once the library has reported something
EVERY_S = 10.0  # at most this long between two lines on stderr
log = logging.getLogger("ihprobe.cli")


def stage(message: str) -> None:
    """Report a stage of a subcommand's own work (loading a model, writing files)."""
    log.info(message, extra=STAGE)


class _Latest(logging.Handler):
    """Keeps the newest stage record of the ``ihprobe`` loggers (one logged with
    ``extra=STAGE``), else the newest INFO record."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.stage: str | None = None
        self.other: str | None = None

    @property
    def message(self) -> str | None:
        """None until the library reports something: no line while arguments are checked."""
        return self.stage or self.other

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().splitlines()[0][:160]
        if is_stage(record):
            self.stage = text
        else:
            self.other = text


@contextlib.contextmanager
def stage_lines(command: str, *, enabled: bool | None = None) -> Iterator[None]:
    """Print ``ihprobe COMMAND: 20 s, <latest stage>`` to stderr every :data:`EVERY_S` seconds
    while the block runs; ``enabled`` None means: when stderr is not a terminal."""
    if enabled is None:
        enabled = not sys.stderr.isatty()
    if not enabled:
        yield
        return
    logger = logging.getLogger("ihprobe")
    latest, level = _Latest(), logger.level
    logger.addHandler(latest)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)  # records reach `latest`; printing handlers keep their level
    done, start = threading.Event(), time.monotonic()

    def tick() -> None:
        wait = min(FIRST_S, EVERY_S)
        while not done.wait(wait):
            if latest.message is None:
                continue  # still checking arguments: an error stays one line
            wait = EVERY_S
            elapsed = time.monotonic() - start
            print(
                f"ihprobe {command}: {elapsed:.0f} s, {latest.message}", file=sys.stderr, flush=True
            )

    ticker = threading.Thread(target=tick, name="ihprobe-stage-lines", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        logger.removeHandler(latest)
        logger.setLevel(level)
