"""The forecast study's runs as data.

:data:`DEMO` is the demo configuration these results were measured with: the demo's model and
run of 2026-12-01 (2 layers x 4 heads, d_model 64, 500 updates of B = 32, C = 64 on repeating
random tokens; one torch thread, as the demo). The demo has grown since (2 x 10 heads, d_model
80), so the configuration is pinned here rather than read from it: a rerun trains the runs the
results file describes. Five seeds at B = 32, plus two earlier runs at B/2 and 2B (seed 0) that
play the user's ``--law-from`` runs; their updates are the demo's scaled by the published law's
ratio U(B') / U(B) (B^-0.37), so each runs as far past its expected emergence as the demo does.

>>> [config("runs/f", 0, b).steps for b in (16, 32, 64)]
[660, 500, 400]
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ihprobe import TrainConfig, predict_emergence

DEMO = TrainConfig(
    producer="repeats",
    producer_options={"base": "iid", "vocab_size": 64, "period": (4, 16), "start": (0, 4)},
    layers=2,
    heads=4,
    d_model=64,
    context=64,
    batch_size=32,
    steps=500,
    lr=3e-3,
    schedule="constant",
    checkpoints="linear",
    n_checkpoints=20,
    progress=False,
)
THREADS = 1  # as the demo: more threads spin-wait on shared cores
SEEDS = (0, 1, 2, 3, 4)
LAW_FROM = {"B16": DEMO.batch_size // 2, "B64": DEMO.batch_size * 2}  # earlier runs' B
AT = (0.1, 0.3, 0.5)  # the forecasts judged: those made after these fractions of the run


def config(out: str | Path, seed: int, batch_size: int) -> TrainConfig:
    """The demo's run with live probes at ``batch_size`` (updates scaled by the law)."""
    scale = (
        predict_emergence(batch_size, DEMO.context).updates
        / predict_emergence(DEMO.batch_size, DEMO.context).updates
    )
    steps = math.ceil(DEMO.steps * scale / DEMO.n_checkpoints) * DEMO.n_checkpoints
    return replace(
        DEMO,
        out=str(out),
        seed=seed,
        batch_size=batch_size,
        steps=steps,
        live_probes=True,
        resume=True,
    )
