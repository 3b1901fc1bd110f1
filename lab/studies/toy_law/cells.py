"""The toy law's cells as data: a small (B, C) grid at two widths, one seed each, on rows of
random tokens that repeat with a period drawn per row from 8..32 (:mod:`studies.toy_law.periodic`).

The learning rate is constant (3e-3), so the emergence step does not depend on a run's budget;
each run gets ``--tokens`` training tokens (default :data:`TOKENS`).

>>> [c.out for c in (config("runs/t", 16, 64, 64, 1e6, 16),)]
['runs/t/B16-C64-d64']
"""

from __future__ import annotations

from ihprobe import TrainConfig

GRID = (  # (batch_size, context, d_model)
    (16, 64, 64),
    (32, 64, 64),
    (64, 64, 64),
    (32, 128, 64),
    (32, 64, 128),
)
TOKENS = 1.5e6  # training tokens per run
CHECKPOINTS = 16  # log-spaced, per run
PROBE = {"n": 16, "batch": 50}  # the emergence probe of every run


def config(out: str, B: int, C: int, width: int, tokens: float, checkpoints: int) -> TrainConfig:
    """The run of cell ``(B, C, width)`` under ``out``."""
    return TrainConfig(
        out=f"{out}/B{B}-C{C}-d{width}",
        producer="periodic",
        producer_options={},
        layers=2,
        heads=4,
        d_model=width,
        context=C,
        batch_size=B,
        tokens=int(tokens),
        lr=3e-3,
        schedule="constant",
        n_checkpoints=checkpoints,
        progress=False,
    )
