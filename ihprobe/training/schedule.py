"""Schedules of a training run, as pure functions of the step: learning rate and checkpoints.

A pure function of the step needs no state of its own, so a resumed run follows exactly the same
schedule as an uninterrupted one.

>>> [round(learning_rate(s, lr=1.0, total=10, warmup=0.2), 3) for s in (0, 1, 2, 6, 9)]
[0.5, 1.0, 1.0, 0.5, 0.038]
>>> checkpoint_steps("log", total=100, tokens_per_update=1000, n=5)
[0, 1, 3, 6, 16, 40, 100]
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
    spec: str | Sequence[int], *, total: int, tokens_per_update: int, n: int = 20
) -> list[int]:
    """The updates after which a checkpoint is saved; always includes 0 and ``total``.

    Args:
        spec: ``"log"``: ``n`` points log-spaced in tokens from one update to the whole budget,
            like [A]'s 0.25M, 0.5M, 1M, 2M, ... (a geometric series; its ratio follows from the
            budget and ``n``). ``"linear"``: ``n`` evenly spaced points. A list: token counts;
            each becomes the first update at which at least that many tokens have been seen.
        total: updates in the run.
        tokens_per_update: ``batch_size * context``.
        n: number of checkpoints after step 0 for ``"log"`` and ``"linear"``; points that round
            to the same update are saved once.

    Example:
        >>> checkpoint_steps([0, 2500, 10_000], total=10, tokens_per_update=1000)
        [0, 3, 10]
    """
    if isinstance(spec, str):
        if spec not in CHECKPOINT_SCHEDULES:
            raise IhprobeError(
                f"checkpoints={spec!r}: pass 'log', 'linear' or a list of token counts."
            )
        if n < 1:
            raise IhprobeError(f"n_checkpoints={n}: need at least 1.")
        if spec == "linear":
            steps = {round(total * i / n) for i in range(1, n + 1)}
        else:
            steps = {round(total ** (i / n)) for i in range(n + 1)}
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
    return sorted(steps | {0, total})
