"""Repeats: background text whose rows turn periodic at a random point, with a random period.

Row b keeps its background tokens up to a start a_b, then repeats the segment that begins there
with a period P_b, both drawn per row: ``x[t] = x[a + (t - a) % P]`` for ``t >= a``. Because
start and period vary from row to row, no head attending at a fixed offset can predict the
repeats; a content-based induction head (find the earlier occurrence of the current token,
copy what followed it) can. A fixed period is the trap: positional heads solve it while
prefix matching stays at chance.

This is the demo's default data (natural text from the embedded corpus as background): a
2-layer model forms induction heads within about a thousand updates on a CPU.

>>> p = RepeatsProducer(batch_size=4, context=32, period=(5, 5), start=(3, 3), base="iid",
...                     vocab_size=50)
>>> x = p.sample(0).tokens                   # from position 3 on, x repeats with period 5
>>> bool((x[:, 8:] == x[:, 3:27]).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data.background import BackgroundOptions, BackgroundProducer
from ihprobe.data.base import Batch


@dataclass(frozen=True)
class RepeatsOptions(BackgroundOptions):
    """The repeats producer's options, over a background producer (natural text by default).

    Args:
        period: ``(low, high)`` range of the period P, inclusive, drawn uniformly per row
            (an int: a fixed period).
        start: ``(low, high)`` range of the position where repetition starts, inclusive;
            default ``(0, context // 2)``.
        base, base_options: the background producer, see :class:`BackgroundOptions`.
    """

    period: int | tuple[int, int] = (8, 32)
    start: int | tuple[int, int] | None = None


class RepeatsProducer(BackgroundProducer):
    """Rows of a background producer that turn periodic at a random start.

    Options: :class:`RepeatsOptions`; ``config()`` reports the period and start ranges
    resolved for this context.
    """

    name = "repeats"
    Options = RepeatsOptions
    options: RepeatsOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        o, c = self.options, self.context
        self.options = replace(  # ranges resolved for this context, as config() reports them
            o,
            period=_range("period", o.period, 1, c - 1),
            start=_range("start", (0, c // 2) if o.start is None else o.start, 0, c - 2),
        )

    def sample(self, step: int) -> Batch:
        tokens = self.base.sample(step).tokens
        g = self.generator(step)
        b, c = tokens.shape
        (p_low, p_high), (a_low, a_high) = self.options.period, self.options.start
        period = torch.randint(p_low, p_high + 1, (b, 1), generator=g)
        start = torch.randint(a_low, a_high + 1, (b, 1), generator=g)
        t = torch.arange(c)[None, :]  # [1, c]
        index = torch.where(t < start, t, start + (t - start) % period)  # [b, c]
        repeated = (t >= start + period).float().mean().item()  # share of copied tokens
        return Batch(tokens=tokens.gather(1, index), info={"repeated_fraction": repeated})


def _range(name: str, value: int | tuple[int, ...], low: int, high: int) -> tuple[int, int]:
    """``value`` as an inclusive ``(lo, hi)`` range within [low, high] (an int: lo = hi)."""
    lo, hi = (value, value) if isinstance(value, int) else (value[0], value[1])
    if not low <= lo <= hi <= high:
        raise IhprobeError(
            f"{name}=({lo}, {hi}) must satisfy {low} <= low <= high <= {high} for this context."
        )
    return lo, hi
