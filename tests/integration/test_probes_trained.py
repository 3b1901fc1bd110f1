"""A 2-layer model trained here on content-based repetition grows an induction head that
``scan`` finds: prefix matching and associative recall far above chance."""

from __future__ import annotations

import math

import pytest

import ihprobe
from tests.helpers import VOCAB


@pytest.mark.slow
@pytest.mark.xdist_group("two-layer-trained")
def test_trained_model_has_an_induction_head_that_scan_finds(two_layer_checkpoint):
    model = ihprobe.load(two_layer_checkpoint)
    n = 32
    metrics = ["prefix_matching", "logit_attribution", "copying", "ar_accuracy", "induction_loss"]
    scores = ihprobe.scan(model, metrics, n=n)
    chance = math.log(2) / n
    layer, head, best = scores.top_heads("prefix_matching", 1)[0]
    assert best > 0.3 > 10 * chance  # far above ln(2)/n
    assert layer == 1  # induction needs the previous-token head of layer 0 to compose with
    assert scores.head["logit_attribution"][layer, head] > 3 / n  # it writes the answer: LA
    assert scores.head["copying"][layer, head] > 0  # ... by copying what it attends to
    assert scores.model["ar_accuracy"] > 0.3 > 30 / VOCAB  # far above 1/V
    assert scores.model["induction_loss"] < math.log(VOCAB) / 2
