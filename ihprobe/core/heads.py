"""Head names: ``L1H3`` (how reports and tables print a head), ``1.3`` (layer.head) or a
``(layer, head)`` pair all name the same head, everywhere a head is passed in.

>>> head_of("L1H3"), head_of("1.3"), head_of((1, 3)), head_of("l1h3")
((1, 3), (1, 3), (1, 3), (1, 3))
>>> heads_of("L0H1,1.2")
[(0, 1), (1, 2)]
>>> head_name((1, 3))
'L1H3'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ihprobe.core.errors import IhprobeError

PATTERN = re.compile(r"\s*(?:[Ll](\d+)[Hh](\d+)|(\d+)\.(\d+))\s*")


def head_of(value: str | Sequence[int], what: str = "a head") -> tuple[int, int]:
    """``(layer, head)`` of ``"L1H3"``, ``"1.3"`` or ``(1, 3)``; an :class:`IhprobeError`
    naming ``what`` otherwise."""
    if isinstance(value, str):
        found = PATTERN.fullmatch(value)
        if found:
            numbers = [int(g) for g in found.groups() if g is not None]
            return numbers[0], numbers[1]
    elif (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        return int(value[0]), int(value[1])
    raise IhprobeError(f"{what} is written L1H3 or 1.3 (layer 1, head 3), got {value!r}.")


def heads_of(value: str | Sequence, what: str = "heads") -> list[tuple[int, int]]:
    """Heads from a comma-separated string (``"L1H3,L1H0"``) or a list of heads."""
    items = [part for part in value.split(",") if part.strip()] if isinstance(value, str) else value
    if not items:
        raise IhprobeError(f"{what} is empty; name heads as L1H3 or 1.3.")
    return [head_of(item, what) for item in items]


def head_name(head: tuple[int, int]) -> str:
    """``(1, 3)`` -> ``"L1H3"``."""
    return f"L{head[0]}H{head[1]}"
