"""Science smoke test: on data of high repetition and reliability a 2-layer model forms an
induction head (max prefix-matching score far above chance) and a 1-layer model does not."""

from __future__ import annotations

import json

import pytest
import torch

from ihprobe import data
from ihprobe.data.base import Batch, Producer
from ihprobe.data.stats import corpus_stats
from ihprobe.training.trainer import TrainConfig, train

pytestmark = pytest.mark.slow


class RepeatedPermutations(Producer):
    """Rows that cycle through ``period`` distinct random tokens, the period drawn per row.

    Every token after the first period repeats an earlier one (repetition) and is followed by
    the same successor as before (reliability): copying from context is the only way to
    predict it, and variable periods rule out fixed-offset positional solutions.
    """

    name = "repeated-permutations"

    def __init__(
        self, *, batch_size, context, seed=0, total_steps=1, vocab_size=64, low=6, high=16
    ):
        super().__init__(batch_size=batch_size, context=context, seed=seed, total_steps=total_steps)
        self.vocab_size, self.special, self.low, self.high = vocab_size, {}, low, high

    def sample(self, step: int) -> Batch:
        g = self.generator(step)
        period = torch.randint(self.low, self.high + 1, (self.batch_size, 1), generator=g)
        perm = torch.rand(self.batch_size, self.vocab_size, generator=g).argsort(1)
        return Batch(tokens=perm.gather(1, torch.arange(self.context) % period))

    def config(self) -> dict:
        return {"vocab_size": self.vocab_size, "low": self.low, "high": self.high}


@pytest.fixture
def producer(monkeypatch):
    monkeypatch.setitem(data.PRODUCERS, RepeatedPermutations.name, RepeatedPermutations)
    return RepeatedPermutations.name


def max_ps(layers: int, out, producer: str) -> list[float]:
    config = TrainConfig(
        out=str(out),
        producer=producer,
        layers=layers,
        heads=4,
        d_model=64,
        context=32,
        batch_size=32,
        steps=500,  # the jump (max PS 0.1 -> 0.8) comes at about update 330
        lr=3e-3,
        schedule="constant",
        checkpoints="linear",
        n_checkpoints=1,
        live_probes=True,
        progress=False,
        device="cpu",
    )
    run = train(config)
    records = [json.loads(line) for line in (run / "probes.jsonl").read_text().splitlines()]
    return [r["max_prefix_matching"] for r in records]


def test_two_layers_form_an_induction_head_and_one_layer_does_not(tmp_path, producer):
    stats = corpus_stats(RepeatedPermutations(batch_size=64, context=32).sample(0).tokens, 32)
    assert stats["repetition"] > 0.5 and stats["reliability"] > 0.95

    chance = torch.log(torch.tensor(2.0)).item() / 16  # uniform causal attention, n = 16
    start, two = max_ps(2, tmp_path / "two", producer)
    assert start < 2 * chance
    assert two > 0.5, f"2-layer max PS {two:.3f}: no induction head formed"
    _, one = max_ps(1, tmp_path / "one", producer)
    assert one < 0.15, f"1-layer max PS {one:.3f}: a 1-layer model cannot form induction heads"
