"""Schedules of a training run, as pure functions of the step: learning rate and checkpoints.

A pure function of the step needs no state of its own, so a resumed run follows exactly the same
schedule as an uninterrupted one.

>>> [round(learning_rate(s, lr=1.0, total=10, warmup=0.2), 3) for s in (0, 1, 2, 6, 9)]
[0.5, 1.0, 1.0, 0.5, 0.038]
>>> checkpoint_steps("log", total=100, tokens_per_update=1000, n=5)
[0, 1, 3, 10, 32, 100]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ihprobe.core.errors import IhprobeError

LR_SCHEDULES = ("cosine", "constant")
CHECKPOINT_SCHEDULES = ("log", "linear")


def learning_rate(
    step: int, *, lr: float, total: int, warmup: float = 0.01, schedule: str = "cosine"
) -> float:
    """The learning rate of update ``step`` (0-based) of ``total``.

    Linear warm-up over the first ``ceil(warmup * total)`` updates (update ``i`` of the warm-up
    uses ``lr * (i + 1) / n_warmup``), then ``"cosine"`` decay to 0 at the end of training
    (HF's ``get_cosine_schedule_with_warmup``) or ``"constant"``.

    Example:
        >>> learning_rate(0, lr=3e-3, total=1000, warmup=0.0, schedule="constant")
        0.003
    """
    if schedule not in LR_SCHEDULES:
        raise IhprobeError(f"schedule={schedule!r} is not one of {', '.join(LR_SCHEDULES)}.")
    n_warmup = math.ceil(warmup * total)
    if step < n_warmup:
        return lr * (step + 1) / n_warmup
    if schedule == "constant":
        return lr
    progress = (step - n_warmup) / max(1, total - n_warmup)
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def checkpoint_steps(
    spec: str | Sequence[int],
    *,
    total: int,
    tokens_per_update: int,
    n: int = 20,
    extended_to: int | None = None,
) -> list[int]:
    """The updates after which a checkpoint is saved; always includes 0 and the last update.

    Args:
        spec: ``"log"``: ``n`` points log-spaced in tokens from one update to the whole budget,
            like [A]'s 0.25M, 0.5M, 1M, 2M, ... (a geometric series; its ratio follows from the
            budget and ``n``). ``"linear"``: ``n`` evenly spaced points. A list: token counts;
            each becomes the first update at which at least that many tokens have been seen.
        total: updates in the run (of its first budget, for an extended run).
        tokens_per_update: ``batch_size * context``.
        n: checkpoints after step 0 for ``"log"`` and ``"linear"`` (so ``n + 1`` with step 0);
            points that round to the same update are saved once, so a short run can have fewer.
        extended_to: the new last update of a run extended past ``total``: the same rule goes
            on (the geometric series with its ratio, the even spacing) up to it; a list adds
            only the new end.

    Example:
        >>> checkpoint_steps([0, 2500, 10_000], total=10, tokens_per_update=1000)
        [0, 3, 10]
        >>> checkpoint_steps("linear", total=10, tokens_per_update=1, n=2, extended_to=23)
        [0, 5, 10, 15, 20, 23]
    """
    end = total if extended_to is None else extended_to
    if isinstance(spec, str):
        if spec not in CHECKPOINT_SCHEDULES:
            raise IhprobeError(
                f"checkpoints={spec!r}: pass 'log', 'linear' or a list of token counts."
            )
        if n < 1:
            raise IhprobeError(f"n_checkpoints={n}: need at least 1.")
        steps = _points(spec, total=total, n=n, end=end)
    else:
        counts = [int(c) for c in spec]
        budget = total * tokens_per_update
        bad = [c for c in counts if c < 0 or c > budget]
        if bad:
            raise IhprobeError(
                f"checkpoint token counts {bad} are outside the run's budget of 0..{budget} "
                "tokens; drop them or raise --steps/--tokens."
            )
        steps = {math.ceil(c / tokens_per_update) for c in counts}
    return sorted(steps | {0, total, end})


def _points(spec: str, *, total: int, n: int, end: int) -> set[int]:
    """The updates of points ``1, 2, ...`` of a ``"log"`` or ``"linear"`` schedule up to ``end``
    (points past ``n`` go on by the same rule), in work proportional to the updates, not to
    ``n``: where consecutive points lie under one update apart every update is a point, so
    ``--n-checkpoints 1e9`` costs no loop of 1e9.

    >>> sorted(_points("log", total=5, n=10**9, end=5))
    [1, 2, 3, 4, 5]
    >>> sorted(_points("linear", total=4, n=10**12, end=6))
    [1, 2, 3, 4, 5, 6]
    """
    if total < 2:  # a one-update budget cannot grow
        return {total}
    if spec == "linear" or n == 1:
        if total < n:  # points under one update apart
            return set(range(1, end + 1))
        last = math.floor((end + 0.5) * n / total)  # the last point that rounds to <= end
        return {round(total * i / n) for i in range(1, last + 1)} - {end + 1}
    ratio = math.expm1(math.log(total) / (n - 1))  # each point is the last times (1 + ratio)
    dense = min(0.5 / ratio, end)  # below it consecutive points lie under half an update apart
    found = set(range(1, math.floor(dense) + 1)) if dense >= 1 else set()
    # the first point that rounds past the dense run: total ** x >= floor(dense) + 0.5 (one
    # index earlier, against rounding); from there points lie at least half an update apart
    past = math.log(math.floor(dense) + 0.5) / math.log(total) if dense >= 1 else 0.0
    i = max(1, math.ceil(past * (n - 1)))
    while (step := _point(spec, i, total=total, n=n)) <= end:
        found.add(step)
        i += 1
    return found


def _point(spec: str, i: int, *, total: int, n: int) -> int:
    """The update of checkpoint ``i`` (1-based) of a ``"log"`` or ``"linear"`` schedule; ``i > n``
    goes on past ``total`` by the same rule (one log point, the budget, repeats as a step)."""
    if spec == "linear" or n == 1:
        return round(total * i / n)
    return round(total ** ((i - 1) / (n - 1)))
