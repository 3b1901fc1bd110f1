"""A 2-layer model trained here on content-based repetition grows an induction head that
``scan`` finds: prefix matching and associative recall far above chance (DESIGN sizing facts)."""

from __future__ import annotations

import math

import pytest
import torch

import ihprobe
from ihprobe.core.standin import id_tokenizer
from tests.conftest import save_checkpoint, tiny_hf_model

VOCAB, CONTEXT, BATCH = 128, 64, 32


def periodic_rows(generator: torch.Generator) -> torch.Tensor:
    """Random tokens repeating with a period drawn per row from 8..32: only induction (copy
    what followed the earlier occurrence) solves every row; fixed offsets do not."""
    period = torch.randint(8, 33, (BATCH, 1), generator=generator)
    base = torch.randint(0, VOCAB, (BATCH, 32), generator=generator)
    return base.gather(1, torch.arange(CONTEXT) % period)


def train_two_layer(max_updates=2500, target_loss=2.8, *, model=None, seed=0):
    """Train ``model`` (default: a fresh 2-layer GPT-NeoX) on periodic rows drawn with ``seed``."""
    if model is None:
        model = tiny_hf_model("gpt-neox", vocab_size=VOCAB, context=CONTEXT)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    recent = []
    for _ in range(max_updates):
        rows = periodic_rows(generator)
        loss = model(rows, labels=rows).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        recent = (recent + [loss.item()])[-50:]
        if len(recent) == 50 and sum(recent) / 50 < target_loss:  # past the phase change
            break
    return model.eval()


@pytest.mark.slow
def test_trained_model_has_an_induction_head_that_scan_finds(tmp_path):
    directory = save_checkpoint(train_two_layer(), tmp_path / "trained", id_tokenizer(VOCAB))
    model = ihprobe.load(directory)
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
