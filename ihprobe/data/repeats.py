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

import torch

from ihprobe.data.base import Batch, Producer
from ihprobe.errors import IhprobeError


class RepeatsProducer(Producer):
    """Periodic repeats over a background producer (natural text by default).

    Args:
        period: ``(low, high)`` range of the period P, inclusive, drawn uniformly per row.
        start: ``(low, high)`` range of the position where repetition starts, inclusive;
            default ``(0, context // 2)``.
        base: the background producer's name; ``base_options`` are passed to it.
    """

    name = "repeats"

    def __init__(
        self,
        *,
        batch_size: int,
        context: int,
        seed: int = 0,
        total_steps: int = 1,
        period: tuple[int, int] | list[int] = (8, 32),
        start: tuple[int, int] | list[int] | None = None,
        base: str = "natural",
        **base_options,
    ):
        super().__init__(batch_size=batch_size, context=context, seed=seed, total_steps=total_steps)
        from ihprobe.data import make_producer

        self.period = _range("period", period, 1, context - 1)
        self.start = _range("start", start or (0, context // 2), 0, context - 2)
        self.base_name, self.base_options = base, dict(base_options)
        self.base = make_producer(base, batch_size=batch_size, context=context, seed=seed,
                                  total_steps=total_steps, **base_options)  # fmt: skip
        self.vocab_size, self.special = self.base.vocab_size, dict(self.base.special)

    def sample(self, step: int) -> Batch:
        tokens = self.base.sample(step).tokens
        g = self.generator(step)
        b, c = tokens.shape
        period = torch.randint(self.period[0], self.period[1] + 1, (b, 1), generator=g)
        start = torch.randint(self.start[0], self.start[1] + 1, (b, 1), generator=g)
        t = torch.arange(c)[None, :]  # [1, c]
        index = torch.where(t < start, t, start + (t - start) % period)  # [b, c]
        repeated = (t >= start + period).float().mean().item()  # share of copied tokens
        return Batch(tokens=tokens.gather(1, index), info={"repeated_fraction": repeated})

    def config(self) -> dict:
        return {**self.base_config(), "period": list(self.period), "start": list(self.start),
                "base": self.base_name, **self.base_options}  # fmt: skip

    def tokenizer(self):
        return self.base.tokenizer()


def _range(name: str, value, low: int, high: int) -> tuple[int, int]:
    lo, hi = (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))
    if not low <= lo <= hi <= high:
        raise IhprobeError(
            f"{name}=({lo}, {hi}) must satisfy {low} <= low <= high <= {high} for this context."
        )
    return lo, hi
