"""Named training configs, each for one purpose; ``dataclasses.replace`` one to vary it.

* :data:`DEMO`: the demo's model and run (``ihprobe demo``): heads form after a few hundred
  updates, about a minute and a half on 2 CPU cores. Random tokens are the background because
  only copying can
  predict them: a tiny model forms its induction heads within a few hundred updates, where over
  natural text it first spends thousands learning bigrams.
* :data:`NATURAL_TEXT`: the recipe that forms induction heads from natural text on a CPU (the
  pilot ``d128-lr3e-3`` of ``lab/studies/natural``, exported by ``make reference``): the
  documentation corpus (``make corpus``) under its 512-id BPE; set ``producer_options["text"]``
  to the corpus's ``train`` folder.

The law grid's cells are the study's own data (``lab/studies/law/cells.py``).

>>> DEMO.total_steps, DEMO.batch_size * DEMO.context
(500, 2048)
>>> NATURAL_TEXT.d_model, NATURAL_TEXT.tokens
(128, 30000000)
"""

from __future__ import annotations

from ihprobe.training.config import TrainConfig

DEMO = TrainConfig(
    out="runs/demo",
    producer="repeats",  # rows that turn periodic at a random point (README)
    producer_options={
        "base": "iid",  # uniform random tokens before and inside the repeats
        "vocab_size": 64,
        "period": (4, 16),  # period drawn per row: no fixed offset solves the repeats
        "start": (0, 4),  # where a row turns periodic, drawn per row
    },
    layers=2,  # Elhage et al.: induction needs two layers (composition)
    # ten heads per layer (of 8 dimensions): a top set of 3 in layer 1 leaves C(7, 3) = 35
    # distinct layer-matched sets, enough for a permutation p-value to reach 1/20 (with 4
    # heads per layer only 3 sets existed, so p could not go below 1/4)
    heads=10,
    d_model=80,
    context=64,
    batch_size=32,
    steps=500,
    lr=3e-3,
    schedule="constant",  # a cosine decay slows the transition past the end of the run
    checkpoints="linear",  # the transition is late in a short run: resolve it evenly
    n_checkpoints=20,
)

NATURAL_TEXT = TrainConfig(
    producer="natural",
    producer_options={"vocab_size": 512},
    arch="gpt-neox",
    layers=2,
    heads=4,
    d_model=128,  # d_head 32, with MLPs
    context=256,
    batch_size=4,
    tokens=30_000_000,  # about 2x the law's updates at B 4, C 256
    lr=3e-3,
    schedule="constant",
    warmup=0.01,
    checkpoints="linear",
    n_checkpoints=24,
    live_probes=True,
    state_every=500,
)
