"""Producer batches are pinned to those of the code before options became dataclasses.

``tests/data/producer_batches.npz`` was written by the producers at main commit ba15f45 (before
the options refactor), in a separate process, for the cases below; the refactored producers
must give the same tokens and the same ``Batch.info`` for the same seeds and steps. The cases
avoid trained tokenizers and fitted Markov matrices, whose exact values may depend on library
versions and CPU; those producers were compared against the same commit once, by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ihprobe.data import make_producer

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "producer_batches.npz"
STEPS = (0, 5, 1, 700)  # out of order, and past a block of StepBlocks
CASES = {
    "iid": ("iid", {"vocab_size": 64}),
    "iid-zipf": ("iid", {"vocab_size": 50, "marginal": "zipf", "zipf_exponent": 1.2}),
    "iid-weights": ("iid", {"vocab_size": 4, "marginal": [1, 2, 3, 4]}),
    "bi-induct-token": (
        "bi-induct",
        {"base": "iid", "vocab_size": 40, "snippet_length": 3, "m0": 0.9},
    ),
    "bi-induct-sequence-random": (
        "bi-induct",
        {
            "base": "iid",
            "vocab_size": 40,
            "snippet_length": 3,
            "m0": 0.7,
            "mixing": "sequence",
            "snippet_source": "random",
            "direction": "backward",
        },
    ),
    "markov-iid-order2-repetition": (
        "markov",
        {
            "vocab_size": 30,
            "local_dependency": False,
            "order": 2,
            "repetition": 0.9,
            "reliability": 0.6,
        },
    ),
    "repeats": ("repeats", {"base": "iid", "vocab_size": 20, "period": [2, 5], "start": (1, 4)}),
}


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE, allow_pickle=False) as saved:
        arrays = {k: saved[k] for k in saved.files}
    return arrays, json.loads(arrays.pop("info").tobytes())


@pytest.mark.parametrize("case", sorted(CASES))
def test_batches_equal_those_of_the_code_before_the_refactor(case, reference):
    arrays, infos = reference
    name, options = CASES[case]
    p = make_producer(name, batch_size=4, context=24, seed=3, total_steps=10, **options)
    for step in STEPS:
        batch = p.sample(step)
        np.testing.assert_array_equal(batch.tokens.numpy(), arrays[f"{case}/{step}"])
        assert batch.info == pytest.approx(infos[f"{case}/{step}"])
