"""What the training loop counts between log lines and across sessions: the loss, a NaN flag,
the speed, and the wall seconds the run has trained.

>>> tally = Tally(torch.device("cpu"))
>>> tally.add(torch.tensor(2.0)); tally.add(torch.tensor(4.0))
>>> float(tally.mean(2)), tally.seconds() >= 0
(3.0, True)
"""

from __future__ import annotations

import math
import time

import torch


class Tally:
    """Loss sum, NaN flag and training time since the last log (saving does not count), and
    the run's wall seconds over every session (saving included).

    A resumed run restores ``start`` and ``loss`` from its state, so its first log line averages
    the same updates as an uninterrupted run's; the speed counts from the resume (``timed``).
    Its seconds continue from the state's ``train_seconds``: a kill loses the time since the
    last state, and a state written before states held the count makes the total unknown (NaN).
    """

    def __init__(self, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.bad = torch.zeros((), dtype=torch.bool, device=device)
        self.last_loss: float | None = None  # the last logged loss
        self.before, self.session = 0.0, time.perf_counter()  # seconds of earlier sessions
        self.reset(0)

    def reset(self, step: int) -> None:
        self.loss.zero_()
        self.start = self.timed = step
        self.paused, self.tick = 0.0, time.perf_counter()

    def restore(self, state: dict) -> int:
        """The open window, last loss and seconds of a checked training state; its step."""
        step = int(state["step"])
        self.last_loss = state["loss"].item() if state["loss"].numel() else None
        self.reset(step)
        if "window_start" in state:  # the losses since the last log line, as if never stopped
            self.start = int(state["window_start"])
            self.loss.copy_(state["window_loss"])
        self.before = float(state["train_seconds"]) if "train_seconds" in state else math.nan
        return step

    def seconds(self) -> float:
        """Wall seconds the run has trained, this session and the earlier ones."""
        return self.before + time.perf_counter() - self.session

    def add(self, loss: torch.Tensor) -> None:
        self.loss += loss
        self.bad |= ~torch.isfinite(loss)

    def pause(self, seconds: float) -> None:
        self.paused += seconds

    def mean(self, step: int) -> torch.Tensor:
        return self.loss / max(1, step - self.start)

    def tokens_per_s(self, step: int, tokens_per_update: int) -> float:
        elapsed = time.perf_counter() - self.tick - self.paused
        return (step - self.timed) * tokens_per_update / max(elapsed, 1e-9)
