"""Long work warns: a loop over checkpoints that will take minutes more says so once its first
checkpoint is done, with the estimate, without any logging set up (the API as the CLI); a quick
one stays quiet; the long API calls show a bar on a terminal by default."""

from __future__ import annotations

import inspect
import logging

import pytest

import ihprobe
from ihprobe.core import stages
from ihprobe.io.runs import Checkpoint
from ihprobe.series.sweep import walk


class Clock:
    """A monotonic clock that moves ``step`` seconds at each checkpoint the loop body handles."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now


def _walk(monkeypatch, caplog, seconds_each: float, total: int) -> list[str]:
    clock = Clock(seconds_each)
    monkeypatch.setattr(stages.time, "monotonic", clock)
    ckpts = [Checkpoint(f"ckpt-{i}", step=i) for i in range(total)]
    with caplog.at_level(logging.WARNING, logger="ihprobe"):
        for _ in walk(ckpts, desc="LLC"):
            clock.now += clock.step  # the work of one checkpoint
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_minutes_of_work_are_announced_after_the_first_checkpoint(monkeypatch, caplog):
    (said,) = _walk(monkeypatch, caplog, seconds_each=270.0, total=5)
    assert said == "LLC: about 18 min more (270 s for the first of 5; progress=True shows a bar)"


@pytest.mark.parametrize("seconds_each, total", [(10.0, 5), (270.0, 1), (30.0, 3)])
def test_quick_work_is_not(monkeypatch, caplog, seconds_each, total):
    assert _walk(monkeypatch, caplog, seconds_each, total) == []  # 40 s, one item, 60 s


def test_the_warning_reaches_a_user_who_set_up_no_logging():
    """A WARNING record of ``ihprobe.*`` is shown by Python's last-resort handler."""
    log = logging.getLogger("ihprobe.series.sweep")
    assert log.getEffectiveLevel() <= logging.WARNING


@pytest.mark.parametrize("name", ["llc_trajectory", "ablation_trajectory"])
def test_long_api_calls_show_a_bar_on_a_terminal_by_default(name):
    assert inspect.signature(getattr(ihprobe, name)).parameters["progress"].default is None
