"""The head check's copying part, proven on planted models: a head that copies passes; a head
with the same induction signature whose ablation damages every position alike but copies
nothing fails (the superseded damage rule passed it); a random model fails."""

from __future__ import annotations

import pytest
import torch

from ihprobe.causal.copying import control_rows, copy_advantage
from ihprobe.causal.head_check import RULE, Rule, head_check
from ihprobe.io.any_model import as_model
from ihprobe.probes.inputs import repeated_tokens
from tests.helpers import blank_gpt2, tiny_hf_model

pytestmark = pytest.mark.slow  # the head check on planted models: about 15 s

V = C = D_HEAD = 32  # one-hot tokens and positions fit one head's width
HEADS, N = 4, 16  # repeat half-length N: the planted attention looks N - 1 back
FAKE, REAL = 0, 1
RULE_N = Rule(lengths=(N,))  # the planted attention works at this one length


def planted(fake: bool):
    """One-layer GPT-2. Head ``REAL`` attends from q to q - N + 1 and copies that token into a
    subspace the unembedding reads (an induction head on rows of period N). With ``fake``, head
    ``FAKE`` attends the same way, more sharply (so it is the head examined), but its value is a
    constant: it writes ``+k`` to a dimension that the position embedding sets to ``-k`` and
    the unembedding reads. Ablating it leaves ``-k`` there: every position's logits get the
    same harmful shift, and nothing copied is lost."""
    model, state = blank_gpt2(1, HEADS, D_HEAD, V, C)
    d = HEADS * D_HEAD
    tok, pos, out = (slice(i * D_HEAD, (i + 1) * D_HEAD) for i in range(3))
    bias_dim, k = 3 * D_HEAD, 4.0
    eye, g = torch.eye(D_HEAD), torch.Generator().manual_seed(0)
    shift = torch.diag(torch.ones(D_HEAD - N + 1), N - 1)[:D_HEAD, :D_HEAD]
    attn, proj = (
        state["transformer.h.0.attn.c_attn.weight"],
        state["transformer.h.0.attn.c_proj.weight"],
    )
    bias = state["transformer.h.0.attn.c_attn.bias"]
    for h, sharp in ((REAL, 2.0), (FAKE, 3.0))[: 1 + fake]:
        q, k_ = (
            slice(i * d + h * D_HEAD, (i + 1) * d + h * D_HEAD - (d - D_HEAD)) for i in range(2)
        )
        attn[pos, q] = sharp * eye
        attn[pos, k_] = shift
    v_real = slice(2 * d + REAL * D_HEAD, 2 * d + (REAL + 1) * D_HEAD)
    attn[tok, v_real] = eye
    proj[REAL * D_HEAD : (REAL + 1) * D_HEAD, out] = eye
    state["lm_head.weight"][:, out] = 0.5 * eye
    state["lm_head.weight"][:, tok] = 0.05 * torch.randn(V, D_HEAD, generator=g)  # no ties
    if fake:
        bias[2 * d + FAKE * D_HEAD] = 1.0  # its value: 1 in one dim whatever it attends to
        proj[FAKE * D_HEAD, bias_dim] = k
        state["transformer.wpe.weight"][:, bias_dim] = -k
        state["lm_head.weight"][:, bias_dim] = torch.linspace(-1.0, 1.0, V)
    model.load_state_dict(state)
    return model


@pytest.fixture(scope="module")
def checks():
    return {fake: head_check(planted(fake), RULE_N, batch=40) for fake in (False, True)}


def test_a_planted_induction_head_copies_and_passes(checks):
    check = checks[False]
    assert check.head == (0, REAL), check.reason
    assert check.signature and check.used and check.copies and check.has_head, check.reason
    assert check.copying_cost_matched >= RULE.copy


def test_a_damage_only_head_with_the_signature_fails_the_copying_part(checks):
    check = checks[True]
    assert check.head == (0, FAKE), check.reason
    assert check.signature and check.used, check.reason  # the signature, and the model copies
    assert check.through_head and check.has_head_by_damage, check.reason  # the old rule: fooled
    assert not check.copies and not check.has_head, check.reason  # the new one is not
    assert check.copying_cost_matched < 0 < RULE.copy


def test_a_random_model_fails():
    check = head_check(tiny_hf_model("gpt-neox", context=128, seed=1), batch=20)
    assert not check.copies and not check.has_head, check.reason
    assert abs(check.copying_cost_matched) < RULE.copy


def test_the_control_rows_repeat_nothing_and_set_the_chance_level():
    tokens = torch.arange(12).reshape(3, 4).repeat(1, 2)  # rows [s, s], n = 4
    control = control_rows(tokens, 4)
    assert torch.equal(control[:, :4], tokens[:, :4])
    assert torch.equal(control[:, 4:], tokens[[2, 0, 1], :4])  # another row's first half
    hooked = as_model(tiny_hf_model("gpt-neox", context=64, seed=2))
    rows = repeated_tokens(hooked, n=N, batch=20, seed=3)
    adv = copy_advantage(hooked, rows, N)
    # a random model gains nothing from either: its advantage is its chance level
    assert abs(adv.advantage) < 0.05 and abs(adv.control) < 0.05
    assert adv.above_chance == pytest.approx(adv.advantage - adv.control)
