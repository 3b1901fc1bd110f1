"""The natural-text pilots, as data: what every pilot shares (``BASE``) and, per pilot, its
model, batch, context, learning rate, budget and the corpus's BPE size (``run.config_of`` turns
one into a TrainConfig on the corpus's train split).

>>> PILOTS["d128-lr3e-3"]["batch_size"], PILOTS["d128-B16"]["batch_size"]
(4, 16)
"""

from __future__ import annotations

BASE = {
    "arch": "gpt-neox",
    "layers": 2,
    "schedule": "constant",
    "warmup": 0.01,
    "checkpoints": "linear",
    "n_checkpoints": 24,
    "live_probes": True,
    "state_every": 500,
}
FIRST = {  # the first recipe: every other pilot says only how it differs from it
    "heads": 4,
    "d_model": 128,
    "context": 256,
    "batch_size": 4,
    "lr": 3e-3,
    "tokens": 30_000_000,
    "vocab": 512,
}
PILOTS: dict[str, dict] = {  # name -> TrainConfig fields over BASE; the corpus BPE size as "vocab"
    # the most promising pilot (d_head 32, 512-id BPE, C 256, B 2, lr 1e-3: PS 0.18 at
    # 12M tokens, 0.24 at 24M) with three times the learning rate and twice the batch
    "d128-lr3e-3": FIRST,
    # wider: d_head 64
    "d256-lr1e-3": {**FIRST, "d_model": 256, "lr": 1e-3, "tokens": 24_000_000},
    # a smaller vocabulary (nearly bytes): tokens repeat more within a context
    "d128-bpe300": {**FIRST, "vocab": 300},
    # the first recipe at the learning rate, which rose in both of its seeds (slowly)
    "d128-lr1e-3": {**FIRST, "lr": 1e-3},
    # attention-only (empty MLPs, d_mlp 0), as in the smallest models that formed induction
    # heads in the first studies of them; otherwise the first recipe
    "ao-d128": {**FIRST, "d_mlp": 0},
    # the other batch size of the law
    "d128-B16": {**FIRST, "batch_size": 16, "tokens": 48_000_000},
    # a larger vocabulary: a token holds more of a word, so the token after an earlier copy
    # predicts more (the 300-id BPE, nearly bytes, formed nothing); otherwise the first recipe
    "d128-bpe2048": {**FIRST, "vocab": 2048},
}
