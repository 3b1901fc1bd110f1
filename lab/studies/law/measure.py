"""What the law grid measures on a finished run: its emergence point (max prefix matching,
n = 16, 50 rows, as every cell is probed; the scans cached in the run's ``trajectory-cache``),
and for the i.i.d. control the checks at its peak, against its base cell and of its losses
(:mod:`studies.law.control`).
"""

from __future__ import annotations

from pathlib import Path

from ihprobe import EmergencePoint, run_emergence
from lab.studies.law import control


def emergence_fields(run: Path) -> tuple[EmergencePoint, dict]:
    """The run's emergence point and its fields of the results row (censored: the run ended
    inside its rise, ``EmergencePoint.at_edge``)."""
    point = run_emergence(run, n=16, batch=50, cache=run / "trajectory-cache")
    placed = point.transition
    return point, {
        "transition": bool(placed),
        "updates": point.updates if placed else None,
        "updates_low": point.updates_low if placed else None,
        "updates_high": point.updates_high if placed else None,
        "threshold_step": point.threshold_step,
        "max_ps": float(point.curve.value.max()),
        "censored": point.at_edge,
    }


def control_fields(run: Path, point: EmergencePoint, cell: dict, base_run: Path) -> dict:
    """The i.i.d. control's checks: at its peak, against its base cell's run, of its losses."""
    return {
        **control.peak_check(run, point.curve),
        **control.base_check(base_run),
        **control.loss_check(run, cell["options"]),
    }
