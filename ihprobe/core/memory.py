"""Memory estimates checked before allocating: a request that cannot fit is one line, not a kill.

Anything whose size scales with a config or a flag (a model built from ``config.json``, a probe
batch, random draws, a producer's tables) estimates its bytes first and calls
:func:`check_memory`, which refuses an estimate above the memory available now (``MemAvailable``
of ``/proc/meminfo``, else physical pages from ``os.sysconf``) with the estimate and the
available memory. ``IHPROBE_NO_SIZE_LIMITS=1`` lifts these checks together with the size limits
of checkpoint configs, for users who know better (swap, or an estimate that is too cautious).

>>> check_memory("a probe batch of 10 rows", 1_000)
>>> check_memory("a probe batch", 10**30)                     # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: a probe batch needs about 1e+21 GB but ... GB of memory ...
"""

from __future__ import annotations

import os

import torch

from ihprobe.core.errors import IhprobeError

SIZE_LIMIT_ENV = "IHPROBE_NO_SIZE_LIMITS"  # set to 1 to lift size limits and memory checks
MEMINFO = "/proc/meminfo"


def limits_on() -> bool:
    """Whether size limits and memory checks apply (unless ``IHPROBE_NO_SIZE_LIMITS`` is set)."""
    return os.environ.get(SIZE_LIMIT_ENV, "0") in ("0", "", "false")


def available_bytes(device: str | torch.device = "cpu") -> int:
    """Memory available to a new allocation on ``device`` now, in bytes: the host's for the
    CPU, the free memory of the GPU for cuda.

    >>> available_bytes() > 0
    True
    """
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":  # no way to ask (meta has no memory): the host's stands in
        device = torch.device("cpu")
    try:
        with open(MEMINFO) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(what: str, estimate: float, *, limits: bool | None = None) -> None:
    """Refuse ``what`` when its ``estimate`` in bytes exceeds the available memory.

    Args:
        what: the allocation, for the message (``"scan with batch=1000000"``).
        estimate: its bytes.
        limits: check (default: unless ``IHPROBE_NO_SIZE_LIMITS=1``).
    """
    if limits is None:
        limits = limits_on()
    if not limits:
        return
    available = available_bytes()
    if estimate > available:
        raise IhprobeError(
            f"{what} needs about {estimate / 1e9:.3g} GB but {available / 1e9:.3g} GB of memory "
            f"is available; make it smaller, or set {SIZE_LIMIT_ENV}=1 if you know it fits."
        )
