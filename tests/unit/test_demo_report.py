"""Every finding sentence of the demo report is chosen from the numbers: each is fed both kinds
of numbers and must say opposite things (no canned sentence that contradicts the data)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.figures.demo_text import (
    effects_text,
    emergence_text,
    law_text,
    loss_text,
    top_head_text,
)


def point(transition: bool, updates: float = 300.0) -> EmergencePoint:
    if not transition:
        return EmergencePoint("prefix_matching", "max", False, reason="the rise is 0.01 < 0.1")
    return EmergencePoint(
        "prefix_matching",
        "max",
        True,
        tokens=updates * 2048,
        updates=updates,
        updates_low=updates - 25,
        updates_high=updates + 25,
        threshold=0.3,
        threshold_step=int(updates) + 25,
    )


def test_emergence_sentence_follows_the_transition():
    found, none = emergence_text(point(True)), emergence_text(point(False))
    assert "300 updates" in found and "No induction-head transition" not in found
    assert "No induction-head transition was detected" in none and "rose" not in none


def test_law_sentence_compares_only_what_was_measured():
    earlier = law_text(point(True, 300), 15000)
    later = law_text(point(True, 30000), 1500)
    close = law_text(point(True, 1000), 1500)
    none = law_text(point(False), 15000)
    assert "50x earlier" in earlier and "later" not in earlier
    assert "20x later" in later and "earlier" not in later
    assert "within a factor of 2" in close
    assert "nothing to compare" in none and "earlier" not in none and "later" not in none


def test_top_head_sentence_says_induction_only_above_the_threshold():
    formed = top_head_text(1, 3, 0.91, chance=0.02, n=16)
    chance = top_head_text(0, 2, 0.03, chance=0.02, n=16)
    assert "attends like an induction head" in formed
    assert "no head attends like one" in chance and "attends like an induction head" not in chance


def test_loss_sentence_says_which_side_of_the_uniform_guess():
    above = loss_text(7.61, 5.70)
    below = loss_text(0.15, 4.16)
    assert "<b>above</b>" in above and "worse than guessing" in above
    assert "below the uniform-guess loss" in below and "worse" not in below


class Effects:
    """A stand-in for HeadEffects: ``change`` of AR accuracy per head (negative is worse)."""

    def __init__(self, change):
        self._change = torch.tensor(change)

    def change(self, metric):
        return self._change

    def ranking(self, metric):
        harm = -self._change.flatten()
        order = torch.argsort(-harm, stable=True)
        n = self._change.shape[1]
        return [(int(i) // n, int(i) % n, float(harm[i])) for i in order]


def test_effects_sentence_says_whether_the_most_harmful_head_has_the_signature():
    ps = torch.tensor([[0.02, 0.01], [0.9, 0.03]])
    scores = SimpleNamespace(head_metric=lambda name: ps)
    induction = effects_text(Effects([[0.0, -0.01], [-0.8, 0.0]]), scores)
    previous = effects_text(Effects([[-0.5, 0.0], [-0.01, 0.0]]), scores)
    nothing = effects_text(Effects([[0.0, 0.01], [0.0, 0.0]]), scores)
    assert "L1H0 (PS 0.90) hurts" in induction and "it is one of" in induction
    assert "L0H0 (PS 0.02) hurts" in previous and "it is not one of" in previous
    assert "No single head's ablation makes" in nothing
