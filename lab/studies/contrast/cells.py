"""The contrast's arms, as data: each arm's producer and options over the same text (the
natural arm alone, the Bi-Induct arms with snippets in three directions), the seeds, and the
default recipe's model, budget and checkpoints (``--recipe docs`` takes the pilot's).

>>> [ARMS[arm][0] for arm in ARMS]
['natural', 'bi-induct', 'bi-induct', 'bi-induct']
"""

from __future__ import annotations

SEEDS = (0, 1, 2, 3, 4)
TEXT = {"vocab_size": 300}
BI_INDUCT = {**TEXT, "snippet_length": 20, "m0": 0.5, "mixing": "token"}
ARMS = {
    "natural": ("natural", TEXT),
    "forward": ("bi-induct", {**BI_INDUCT, "direction": "forward"}),
    "backward": ("bi-induct", {**BI_INDUCT, "direction": "backward"}),
    "balanced": ("bi-induct", {**BI_INDUCT, "direction": "balanced"}),
}
METRICS = ("induction_loss", "ar_accuracy", "natural_loss")
PROTOCOLS = ("global-layer-matched", "global-score-matched", "per-layer")

# the default recipe's model, budget and checkpoints (--recipe docs takes the pilot's)
SHAPE = {
    "layers": 2,
    "heads": 8,
    "d_model": 64,
    "context": 128,
    "batch_size": 8,
    "steps": 8000,
    "checkpoints": 10,
    "state_every": 100,
}
