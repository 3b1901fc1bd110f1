"""The per-model "has an induction head" rule, proven both ways: the natural-text reference head
passes; the same model with that head's output zeroed keeps the signature and fails the function;
a random model fails the signature."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ihprobe
from ihprobe.causal.head_check import RULE, Rule, head_check
from ihprobe.core.errors import IhprobeError
from tests.helpers import tiny_hf_model

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "natural-docs"


@pytest.fixture(scope="module")
def reference_check():
    return head_check(str(REFERENCE), batch=30)


def test_the_natural_text_reference_head_passes_every_part(reference_check):
    check = reference_check
    assert check.has_head, check.reason
    assert check.head == (1, 0)
    # its prefix matching falls with the repeat length, as a real head's does
    assert check.prefix_matching[10] > check.prefix_matching[50] >= RULE.ps
    assert check.loss_drop >= RULE.drop and check.ablation_cost >= RULE.cost
    assert check.copies and check.copying_cost_matched >= RULE.copy  # it copies, alone in L1
    assert check.has_head_by_damage  # the superseded rule agrees here
    assert ihprobe.head_check is head_check
    assert check.to_dict()["has_head"] is True


def test_a_head_that_attends_but_writes_nothing_is_signature_only(reference_check):
    """The fake: the reference head's attention kept, its output projection zeroed."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(REFERENCE)
    layer, head = reference_check.head
    d_head = hf.config.hidden_size // hf.config.num_attention_heads
    with torch.no_grad():
        hf.gpt_neox.layers[layer].attention.dense.weight[:, head * d_head : (head + 1) * d_head] = 0
    check = head_check(hf, batch=30)
    assert check.signature and check.head == reference_check.head
    assert not check.used and not check.through_head and not check.has_head
    assert not check.copies and abs(check.copying_cost) < RULE.copy
    assert "not all >= 0.5" in check.reason and "(< 0.1)" in check.reason


def test_a_random_model_has_no_signature():
    check = head_check(tiny_hf_model("gpt-neox", context=128), batch=20)
    assert not check.signature and not check.has_head
    assert max(check.prefix_matching.values()) < RULE.ps


def test_the_rule_is_strict_where_it_is_asked_to_be(reference_check):
    strict = head_check(str(REFERENCE), Rule(ps=0.45), batch=30)
    assert not strict.signature and not strict.has_head  # 0.34 at n = 50 < 0.45
    assert strict.used and strict.through_head


def test_a_context_too_short_for_every_length_is_one_line():
    with pytest.raises(IhprobeError, match="repeat lengths"):
        head_check(tiny_hf_model("gpt-neox", context=16), Rule(lengths=(10, 25)))


def test_the_science_notes_quote_the_reference_heads_own_check():
    """docs/methods/head-check.md's numbers for the reference head are this check's, at its
    defaults."""
    check = head_check(str(REFERENCE))
    ps = {n: f"{v:.2f}" for n, v in check.prefix_matching.items()}
    page = REFERENCE.parents[1] / "docs" / "methods" / "head-check.md"
    science = " ".join(page.read_text().split())
    assert f"scores {ps[10]} at n = 10 and {ps[50]} at n = 50" in science
    assert (
        f"(+{check.loss_drop:.2f} nats of use, +{check.ablation_cost:.2f} lost without it)"
        in science
    )
