"""An induction circuit written into a real model's weights (issue 46): GPT-2 whose layer 0
holds a previous-token head and whose layer 1 holds an induction head reading it (K-composition),
beside a uniform head, a head whose queries read a shuffled token and a head that attends by
position offset alone. The pair path and the pattern path score them identically, and as
planted: the induction head high on every induction score, the uniform head exactly at the
metric table's chance level, the shuffled head near it, the positional head high only where
its offset happens to fit (repeated halves of its length), not on snippets of varied length."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2LMHeadModel

import ihprobe
from ihprobe.core.standin import id_tokenizer
from tests.helpers import blank_gpt2, save_checkpoint
from tests.integration.test_fast_scores import TOLERANCE

V, C, D_HEAD, HEADS = 64, 64, 64, 4  # one-hot tokens and positions each fill one head's width
N = 8  # the repeated halves' length, which the positional head's offset (7) fits; no snippet does
INDUCTION, UNIFORM, SHUFFLED, POSITIONAL = range(HEADS)  # layer 1's heads
SHARP = 4.0  # query weight: score margins of about 40 after LayerNorm's rescaling
METRICS = [
    "previous_token",
    "prefix_matching",
    "forward_induction_fixed",
    "forward_induction_varied",
]


def shift(offset: int) -> torch.Tensor:
    """``[D_HEAD, D_HEAD]``: one-hot ``e_j`` to ``e_{j + offset}`` (nothing past the end)."""
    return torch.diag(torch.ones(D_HEAD - offset), offset)


def planted_induction_model() -> GPT2LMHeadModel:
    """Residual stream of four 64-dim subspaces: the token, the position, the previous token
    (written by layer 0's head 0, which attends from q to q - 1 by position) and junk. Layer 1's
    heads read them: induction (query: the token; key: the previous token), uniform (no query),
    shuffled (query: a permuted token), positional (query: position q; key: position j as
    j + N - 1). Other weights are zero, MLPs write nothing, the unembedding reads the token."""
    d = 4 * D_HEAD
    tok, pos, prev, _ = (slice(i * D_HEAD, (i + 1) * D_HEAD) for i in range(4))
    model, state = blank_gpt2(2, HEADS, D_HEAD, V, C)
    eye = torch.eye(D_HEAD)
    permutation = torch.randperm(D_HEAD, generator=torch.Generator().manual_seed(0))
    reads = {  # (layer, head) -> (query subspace and map, key subspace and map)
        (0, 0): ((pos, SHARP * eye), (pos, shift(1))),
        (1, INDUCTION): ((tok, SHARP * eye), (prev, eye)),
        (1, SHUFFLED): ((tok, SHARP * eye[permutation]), (prev, eye)),
        (1, POSITIONAL): ((pos, SHARP * eye), (pos, shift(N - 1))),
    }
    for (layer, h), ((q_from, q_map), (k_from, k_map)) in reads.items():
        attn = state[f"transformer.h.{layer}.attn.c_attn.weight"]  # [d, q | k | v]
        q, k = (slice(i * d + h * D_HEAD, i * d + (h + 1) * D_HEAD) for i in range(2))
        attn[q_from, q], attn[k_from, k] = q_map, k_map
    for h in (INDUCTION, SHUFFLED):  # position 0 is its own "previous token": no match there
        state["transformer.h.1.attn.c_attn.weight"][
            pos.start, d + h * D_HEAD : d + (h + 1) * D_HEAD
        ] = -1.0
    v = slice(2 * d, 2 * d + D_HEAD)  # layer 0, head 0 copies the attended token into prev,
    state["transformer.h.0.attn.c_attn.weight"][tok, v] = eye / 8  # undoing LayerNorm's ~8x
    state["transformer.h.0.attn.c_proj.weight"][:D_HEAD, prev] = eye
    state["lm_head.weight"][:, tok] = eye
    model.load_state_dict(state)
    return model


@pytest.fixture(scope="module")
def both_paths(tmp_path_factory):
    folder = save_checkpoint(
        planted_induction_model(), tmp_path_factory.mktemp("planted"), id_tokenizer(V)
    )
    model = ihprobe.load(folder)
    settings = {"n": N, "batch": 8, "seed": 3, "snippet_length": 6}  # varied: |S| of 10 to 30
    return {
        mode: ihprobe.scan(model, METRICS, **settings, attention=mode)
        for mode in ("pairs", "patterns")
    }


def test_both_paths_ran_and_agree(both_paths):
    assert {mode: s.settings["attention"] for mode, s in both_paths.items()} == {
        "pairs": "pairs",
        "patterns": "patterns",
    }
    for metric in METRICS:
        fast, full = (both_paths[mode].head[metric] for mode in ("pairs", "patterns"))
        assert (fast - full).abs().max() <= TOLERANCE, metric


@pytest.mark.parametrize("mode", ["pairs", "patterns"])
def test_the_planted_heads_score_as_planted(both_paths, mode):
    scores = both_paths[mode]
    head = scores.head
    assert head["previous_token"][0, 0] > 0.99  # layer 0's previous-token head
    for metric in ("prefix_matching", "forward_induction_fixed"):
        chance = scores.chance(metric)  # the table's; varied lengths are drawn per row instead
        assert head[metric][1, UNIFORM] == pytest.approx(chance, abs=1e-6), metric
    for metric in ("prefix_matching", "forward_induction_fixed", "forward_induction_varied"):
        assert head[metric][1, INDUCTION] > 0.99, metric  # reads layer 0's output
        uniform = head[metric][1, UNIFORM]  # chance on these very rows
        assert abs(head[metric][1, SHUFFLED] - uniform) < 0.05, metric  # the wrong token: chance
    # the positional head passes prefix matching, whose offset it fits, and is caught by the
    # snippets of varied length: the one fixed-offset suspect
    assert head["prefix_matching"][1, POSITIONAL] > 0.99
    assert [(layer, h) for layer, h, *_ in scores.fixed_offset_suspects()] == [(1, POSITIONAL)]
