"""What the toy law measures: each cell trained once, its emergence point (max prefix
matching, 3-segment fit against log tokens) and the published law's prediction beside it."""

from __future__ import annotations

import time

import pandas as pd

from ihprobe import predict_emergence, run_emergence, train
from ihprobe.data import PRODUCERS
from lab.studies.toy_law import cells
from lab.studies.toy_law.periodic import Periodic


def train_grid(tokens: float, checkpoints: int, out: str) -> pd.DataFrame:
    """Train every cell once; one row per cell."""
    PRODUCERS["periodic"] = Periodic
    rows = []
    for B, C, width in cells.GRID:
        started = time.perf_counter()
        config = cells.config(out, B, C, width, tokens, checkpoints)
        point = run_emergence(train(config), **cells.PROBE)
        rows.append(
            {
                "checkpoints": checkpoints,
                "B": B,
                "C": C,
                "d_model": width,
                "updates": round(point.updates) if point.transition else "none",
                "bracket (updates)": (
                    f"{point.updates_low:.0f}-{point.updates_high:.0f}" if point.transition else ""
                ),
                "first PS >= 0.3 (step)": point.threshold_step,
                "[A] law (updates)": round(predict_emergence(B, C).updates),
                "train+probe s": round(time.perf_counter() - started),
            }
        )
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)
