"""What the loop writes every ``log_every`` updates: one ``metrics.jsonl`` line with the mean
loss of the updates since the last line and the speed; and the check, before each line and
each save, that no loss or gradient became NaN/inf.

>>> import torch
>>> tally = Tally(torch.device("cpu"))
>>> tally.add(torch.tensor(float("nan")))
>>> check_finite(RunDir("runs/none"), World(), tally, 10)  # doctest: +ELLIPSIS
Traceback (most recent call last):
ihprobe.core.errors.IhprobeError: the loss or gradient became NaN/inf by update 10; ...
"""

from __future__ import annotations

from ihprobe.core.errors import IhprobeError
from ihprobe.core.world import World
from ihprobe.io.runs import METRICS, RunDir
from ihprobe.training.learner import Learner
from ihprobe.training.tally import Tally


def log_metrics(config, run: RunDir, world: World, learner: Learner, done: int, lr, norm, info):
    """Append the metrics of the updates since the last log; the loss and speed."""
    tally = learner.tally
    check_finite(run, world, tally, done)
    loss = world.mean(tally.mean(done)).item()
    speed = tally.tokens_per_s(done, config.tokens_per_update)
    if world.main:
        record = {
            "step": done,
            "tokens": done * config.tokens_per_update,
            "loss": loss,
            "lr": lr,
            "grad_norm": norm.item(),
            "tokens_per_s": speed,
            "data": {k: float(v) for k, v in info.items()},
        }
        if tally.start % config.log_every:  # resumed from a state without its window
            record["partial_window"] = done - tally.start
        run.append(METRICS, record)
    tally.last_loss = loss
    tally.reset(done)
    return loss, speed


def check_finite(run: RunDir, world: World, tally: Tally, step: int) -> None:
    """Stop with one line naming the last good checkpoint if any rank saw a NaN/inf."""
    if world.mean(tally.bad.float()).item() > 0:
        last = run.latest_checkpoint() or "none"
        raise IhprobeError(
            f"the loss or gradient became NaN/inf by update {step}; training stopped. The "
            f"last good checkpoint is {last}. Lower --lr, lengthen the warm-up or clip "
            "gradients, then start a new --out."
        )
