"""Stage records: a library log record marked as a stage ("scan 3/20: step-000300") is what the
command line shows on stderr every few seconds when stderr is not a terminal
(``ihprobe/cli/_stages.py``); the library itself never prints.

>>> logging.getLogger("ihprobe.x").info("scan %d/%d", 3, 20, extra=STAGE)
"""

from __future__ import annotations

import logging

STAGE = {"stage": True}  # ``log.info(..., extra=STAGE)`` marks a record as a stage


def is_stage(record: logging.LogRecord) -> bool:
    """Whether ``record`` was logged with ``extra=STAGE``."""
    return bool(getattr(record, "stage", False))
