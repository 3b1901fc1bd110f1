"""What the trainer shows: a progress bar with loss, speed, the last live probe and the forecast,
all kept in memory (nothing re-read from disk per line), and a closing sentence on whether
induction heads formed. Off a terminal, each log line also says the time left at this
session's measured pace (the rough estimate before the start is a cautious bound).

>>> shown = Display(total=10, start=0, enabled=False)
>>> shown.probed({"step": 10, "max_prefix_matching": 0.745, "top_head": [1, 3]}, None)
>>> shown.postfix()["max PS"]
'0.74 (L1H3)'
"""

from __future__ import annotations

import logging
import os
import time

from tqdm.auto import tqdm

from ihprobe.core.memory import duration
from ihprobe.core.stages import STAGE
from ihprobe.dynamics.changepoint import THRESHOLDS
from ihprobe.dynamics.forecast import Forecast, read_forecasts
from ihprobe.io.runs import PROBES, RunDir, run_meta

FORMED = THRESHOLDS["prefix_matching"]  # max PS from which induction heads count as formed
log = logging.getLogger(__name__)


class Display:
    """The progress bar of one training process (disabled off rank 0 or with ``progress``
    off, and when stderr is not a terminal); :meth:`close` leaves its last line showing the last
    probe and forecast. Each log line and probe is also a stage record
    (:mod:`ihprobe.core.stages`), which the command line shows in a log file instead of a bar."""

    def __init__(self, *, total: int, start: int, enabled: bool, clock=time.monotonic):
        self.bar = tqdm(
            total=total,
            initial=start,
            disable=None if enabled else True,  # None: no bar on a non-terminal
            unit="upd",
            dynamic_ncols=True,
        )
        self.done, self.total, self.enabled = start, total, enabled
        self.start, self.clock, self.began = start, clock, clock()
        self.loss: float | None = None
        self.speed: float | None = None
        self.probe: dict | None = None
        self.forecast: Forecast | None = None

    def logged(self, loss: float, speed: float) -> None:
        self.loss, self.speed = loss, speed
        self._show()

    def probed(self, record: dict, forecast: Forecast | None) -> None:
        self.probe, self.forecast = record, forecast or self.forecast
        self._show()

    def advance(self) -> None:
        self.done += 1
        self.bar.update(1)

    def _show(self) -> None:
        shown = self.postfix()
        self.bar.set_postfix(shown, refresh=False)
        if self.enabled:
            parts = [
                f"update {self.done:,}/{self.total:,}",
                *(f"{k} {v}" for k, v in shown.items()),
            ]
            left = self.left()
            if left is not None:
                parts.append(f"about {duration(left)} left")
            log.info(", ".join(parts), extra=STAGE)

    def left(self) -> float | None:
        """Seconds to the last update at this session's pace so far (probes and saves
        included); None before its first update.

        >>> ticks = iter([0.0, 30.0])
        >>> shown = Display(total=100, start=40, enabled=False, clock=lambda: next(ticks))
        >>> for _ in range(10):
        ...     shown.advance()
        >>> shown.left()  # 10 updates in 30 s, 50 to go
        150.0
        """
        if self.done <= self.start:
            return None
        return (self.clock() - self.began) / (self.done - self.start) * (self.total - self.done)

    def close(self) -> None:
        self.bar.set_postfix(self.postfix(), refresh=True)
        self.bar.close()

    def postfix(self) -> dict[str, str]:
        out = {}
        if self.loss is not None:
            out["loss"] = f"{self.loss:.3f}"
        if self.speed is not None:
            out["tok/s"] = f"{self.speed:,.0f}"
        if self.probe is not None:
            layer, head = self.probe["top_head"]
            out["max PS"] = f"{self.probe['max_prefix_matching']:.2f} (L{layer}H{head})"
        if self.forecast is not None:
            out["emergence"] = self.forecast.postfix()
        return out


def outcome(run_dir: str | os.PathLike) -> str | None:
    """One sentence on whether a run's live probes saw induction heads form (None without live
    probes): the forecast's detection when it made one, else the last probe against 0.3.

    Example:
        >>> outcome("no/such/run") is None
        True
    """
    probes = RunDir(run_dir).records(PROBES)
    if not probes:
        return None
    last = max(probes, key=lambda r: r["step"])
    layer, head = last["top_head"]
    measured = (
        f"last probe (update {last['step']}): max prefix matching "
        f"{last['max_prefix_matching']:.3f} at L{layer}H{head}, AR accuracy "
        f"{last['ar_accuracy']:.3f}"
    )
    meta = run_meta(run_dir) or {}
    found = meta.get("emergence")
    if found:
        return (
            f"induction heads formed: emergence detected at ~{found['updates']:,.0f} updates "
            f"({found['updates_low']:,.0f}-{found['updates_high']:,.0f}); {measured}."
        )
    if last["max_prefix_matching"] >= FORMED:
        return f"induction heads formed (max prefix matching above {FORMED}); {measured}."
    forecasts = read_forecasts(run_dir)
    ahead = f"; forecast: emergence at ~{forecasts[-1].postfix()}" if forecasts else ""
    return f"no induction heads yet (max prefix matching below {FORMED}); {measured}{ahead}."
