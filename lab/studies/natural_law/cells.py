"""The natural-text (B, C) grid of [A]'s emergence law, declared before any run.

Recipe (the natural-text recipe of the pilots, ``lab/studies/natural``): GPT-NeoX, 2 layers x 4
heads, d_model 128 with MLPs, the documentation corpus under its 512-id BPE (``make corpus``),
AdamW at a constant 3e-3 after a 1% warm-up, grad clip 1, live probes (max prefix matching and
AR accuracy on 20 rows of repeated random tokens) at 32 evenly spaced checkpoints.

Grid: B in 1..16 and C in 64..512 (16x in B, 8x in C) on a CPU, and the wide corners (B 32-128
at every C up to 1024, and C = 1024 at B 1-16) where a GPU is lent; one seed per cell first, a
second where a GPU is lent; each run's budget is ``LAW_X`` times the law's predicted updates, so
a run at the law is in the middle of its record. Cheapest cells (fewest tokens) run first.

>>> len(CPU_CELLS), list(CELLS)[:3], len(GPU_CELLS), list(GPU_CELLS)[-1]
(20, ['B1-C64', 'B1-C128', 'B2-C64'], 20, 'B128-C1024')
>>> CELLS["B4-C256"]["steps"], round(tokens("B4-C256") / 1e6, 1)
(28855, 29.5)
"""

from __future__ import annotations

import math

from ihprobe.dynamics.law import predict_emergence

BATCH_SIZES = (1, 2, 4, 8, 16)
CONTEXTS = (64, 128, 256, 512)
# the wide corners, for a GPU (hours of a CPU core each): B up to 128, C up to 1024
GPU_BATCH_SIZES = (32, 64, 128)
GPU_CONTEXTS = (*CONTEXTS, 1024)
LAW_X = 2.0  # budget in multiples of the law's predicted updates
SEEDS = (0,)  # a second seed per cell comes next (on a GPU where one is lent)
RECIPE = {
    "producer": "natural",
    "arch": "gpt-neox",
    "layers": 2,
    "heads": 4,
    "d_model": 128,
    "lr": 3e-3,
    "schedule": "constant",
    "warmup": 0.01,
    "grad_clip": 1.0,
    "checkpoints": "linear",
    "n_checkpoints": 32,
    "live_probes": True,
    "state_every": 500,
    "progress": False,
}
VOCAB = 512  # the corpus BPE's size (the producer's ``vocab_size`` option)


def budget(batch_size: int, context: int, times: float = LAW_X) -> int:
    """Updates of one cell's run: ``times`` (``LAW_X``) x the law's prediction, rounded up."""
    return math.ceil(times * predict_emergence(batch_size, context).updates)


def _cells(pairs) -> dict[str, dict]:
    pairs = sorted(pairs, key=lambda bc: budget(*bc) * bc[0] * bc[1])
    return {f"B{B}-C{C}": {"batch_size": B, "context": C, "steps": budget(B, C)} for B, C in pairs}


CPU_CELLS = _cells((B, C) for B in BATCH_SIZES for C in CONTEXTS)
GPU_CELLS = _cells(
    [(B, C) for B in GPU_BATCH_SIZES for C in GPU_CONTEXTS] + [(B, 1024) for B in BATCH_SIZES]
)
CELLS = {**CPU_CELLS, **GPU_CELLS}  # name -> the TrainConfig fields that differ, cheapest first


def tokens(cell: str) -> int:
    """Training tokens of one cell's run."""
    c = CELLS[cell]
    return c["steps"] * c["batch_size"] * c["context"]
