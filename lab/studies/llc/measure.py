"""What the LLC study measures: the LLC at every checkpoint of a run
(:func:`ihprobe.llc_trajectory`, devinterp's SGLD; needs ``pip install 'ihprobe[llc]'``; cached
per checkpoint), its change point by the PS change-point fit (:func:`ihprobe.llc_stages`) and the
run's own prefix-matching emergence point, drawn together in the run's ``llc.html``."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ihprobe import (
    EmergencePoint,
    SGLDSettings,
    llc_figure,
    llc_stages,
    llc_trajectory,
    run_emergence,
    trajectory,
)


def measure(
    run: Path, settings: SGLDSettings
) -> tuple[pd.DataFrame, EmergencePoint, EmergencePoint, float]:
    """(one row per checkpoint with the diagnostics, the LLC's change point, the PS point, the
    seconds the uncached checkpoints took)."""
    begin = time.perf_counter()
    traj = llc_trajectory(run, settings, progress=True)
    seconds = time.perf_counter() - begin
    table = trajectory(run, ["prefix_matching"])
    ps_point = run_emergence(run)
    stage = llc_stages(traj)
    llc_figure(traj, table, stage, ps_point).write_html(run / "llc.html", include_plotlyjs="cdn")
    frame = traj.frame.drop(columns="llc_chains").merge(traj.checks, on="step")
    frame = frame.round({"llc_mean": 1, "llc_std": 1, "init_loss": 3})
    return frame, stage, ps_point, seconds
