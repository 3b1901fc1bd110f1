"""Whether the HF hub can be reached now, and hub calls that fail at once when it cannot.

A hub request made offline retries for tens of seconds and logs each retry; ihprobe asks first
(one TCP connection, 2 s at most) and, offline, runs the call in the hub libraries' offline
mode with their retry warnings silenced, so a missing dataset or model is one line at once.

>>> isinstance(hub_reachable(timeout=0.01), bool)
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
from collections.abc import Iterator
from unittest import mock

HUB_LOGGERS = ("huggingface_hub", "datasets", "urllib3")


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether a TCP connection to the hub (``$HF_ENDPOINT``) opens within ``timeout``
    seconds; False whenever ``HF_HUB_OFFLINE`` is set."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = re.sub(r"^https?://", "", endpoint).split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def hub_calls(online: bool) -> Iterator[None]:
    """Hub libraries' retry warnings silenced, and, when not ``online``, their offline mode
    switched on (for the libraries already imported), so a call fails at once."""
    loggers = [logging.getLogger(name) for name in HUB_LOGGERS]
    levels = [logger.level for logger in loggers]
    with contextlib.ExitStack() as stack:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        if not online:
            for module, name in (
                ("huggingface_hub.constants", "HF_HUB_OFFLINE"),
                ("datasets.config", "HF_HUB_OFFLINE"),
                ("datasets.config", "HF_DATASETS_OFFLINE"),
            ):
                if hasattr(sys.modules.get(module), name):
                    stack.enter_context(mock.patch.object(sys.modules[module], name, True))
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)
