"""Probe inputs and the row-wise recall scores: planted logits, analytic values, bad inputs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.probes import recall
from ihprobe.probes.inputs import repeated_tokens, snippets


def fake_model(vocab=64, n_ctx=128, tokenizer=None):
    """The attributes the input builders read, without building a network."""
    cfg = SimpleNamespace(d_vocab=vocab, n_ctx=n_ctx, device="cpu")
    return SimpleNamespace(cfg=cfg, tokenizer=tokenizer)


# ----------------------------------------------------------------------------- inputs


def test_repeated_tokens_defaults_distinct_and_seeded(tokenizer):
    model = fake_model(vocab=512, n_ctx=128, tokenizer=tokenizer)
    x = repeated_tokens(model)
    assert x.shape == (100, 100) and x.dtype == torch.int64
    assert torch.equal(x[:, :50], x[:, 50:])
    first = x[:, :50].sort(1).values
    assert (first[:, 1:] != first[:, :-1]).all()  # distinct ids within each row
    assert not torch.isin(x, torch.tensor(tokenizer.all_special_ids)).any()  # EOS, SEP never drawn
    assert torch.equal(x, repeated_tokens(model))
    assert not torch.equal(x, repeated_tokens(model, seed=1))
    # short contexts: n = n_ctx // 2
    assert repeated_tokens(fake_model(n_ctx=40), batch=2).shape == (2, 40)


def test_repeated_tokens_are_uniform_over_the_vocabulary():
    x = repeated_tokens(fake_model(vocab=16), n=4, batch=4000, seed=3)[:, :4]
    counts = torch.bincount(x.flatten(), minlength=16).float()
    expected = 4000 * 4 / 16
    assert ((counts - expected).abs() / expected).max() < 0.1


def test_repeated_tokens_with_bos(tokenizer):
    model = fake_model(vocab=512, n_ctx=64, tokenizer=tokenizer)
    x = repeated_tokens(model, bos=True, batch=3)
    assert x.shape == (3, 1 + 2 * 31)  # default n shrinks so that BOS fits
    assert (x[:, 0] == tokenizer.bos_token_id).all()
    assert torch.equal(x[:, 1:32], x[:, 32:])
    with pytest.raises(IhprobeError, match="BOS"):
        repeated_tokens(fake_model(), bos=True)


def test_repeated_tokens_bad_inputs():
    with pytest.raises(IhprobeError, match="largest n that fits is 64"):
        repeated_tokens(fake_model(n_ctx=128), n=65)
    with pytest.raises(IhprobeError, match="largest n that fits is 63"):
        repeated_tokens(fake_model(n_ctx=128), n=64, bos=True, batch=1)
    with pytest.raises(IhprobeError, match="only 10 usable"):
        repeated_tokens(fake_model(vocab=10), n=20)


def test_snippets_forward_and_backward(tokenizer):
    sep = tokenizer.convert_tokens_to_ids("<|sep|>")
    model = fake_model(vocab=512, tokenizer=tokenizer)
    fwd = snippets(model, batch=5, seed=2)
    bwd = snippets(model, batch=5, seed=2, backward=True)
    assert fwd.shape == (5, 41) and (fwd[:, 20] == sep).all()
    assert torch.equal(fwd[:, :20], fwd[:, 21:])
    assert torch.equal(bwd[:, :20].flip(1), bwd[:, 21:])
    # without a tokenizer SEP is one more random id not in S
    bare = snippets(fake_model(vocab=30), length=5, batch=50)
    assert not (bare[:, :5] == bare[:, 5:6]).any()


# ----------------------------------------------------------------------------- recall


def test_next_token_ranks_counts_strictly_greater():
    logits = torch.tensor([[[0.0, 2.0, 1.0, 2.0], [5.0, 5.0, 1.0, 0.0], [0.0] * 4]])
    tokens = torch.tensor([[3, 2, 1]])
    # position 0 -> token 2 (logit 1: two greater), position 1 -> token 1 (logit 5: none greater)
    assert recall.next_token_ranks(logits, tokens).tolist() == [[2, 0]]


def perfect_logits(tokens, n, vocab, bos=False, wrong_rows=()):
    """Logits that put the induction target on top at every query (except in wrong_rows)."""
    b, t = tokens.shape
    logits = torch.zeros(b, t, vocab)
    q = recall.query_positions(n, bos)
    y = tokens[:, q - n + 1]
    logits[torch.arange(b)[:, None], q[None], y] = 10.0
    for r in wrong_rows:
        logits[r, q, (y[r] + 1) % vocab] = 20.0  # one other token above the target
    return logits


@pytest.mark.parametrize("bos", [False, True])
def test_associative_recall_and_induction_loss_on_planted_logits(bos):
    n, vocab = 6, 16
    x = repeated_tokens(fake_model(vocab=vocab), n=n, batch=4, seed=0)
    if bos:
        x = torch.cat([torch.full((4, 1), 15), x], 1)
    logits = perfect_logits(x, n, vocab, bos, wrong_rows=[2])
    acc, rank = recall.associative_recall_per_row(logits, x, n, bos)
    assert acc.tolist() == [1.0, 1.0, 0.0, 1.0] and rank.tolist() == [0.0, 0.0, 1.0, 0.0]
    loss = recall.induction_loss_per_row(logits, x, n, bos)
    right = -math.log(math.exp(10) / (math.exp(10) + vocab - 1))
    wrong = -math.log(math.exp(10) / (math.exp(20) + math.exp(10) + vocab - 2))
    assert loss.tolist() == pytest.approx([right, right, wrong, right], abs=1e-6)
    # uniform logits: loss ln V, every token ties at rank 0
    flat = torch.zeros_like(logits)
    assert recall.induction_loss_per_row(flat, x, n, bos) == pytest.approx([math.log(vocab)] * 4)


def test_icl_score_is_late_minus_early_loss():
    tokens = torch.tensor([[1, 2, 3, 0, 1, 2]])
    logits = torch.zeros(1, 6, 4)
    logits[0, 4, 2] = 5.0  # token 5 (= 2) well predicted; token 1 left uniform
    score = recall.icl_score_per_row(logits, tokens, early=1, late=5)
    late = -math.log(math.exp(5) / (math.exp(5) + 3))
    assert score.item() == pytest.approx(late - math.log(4), rel=1e-5)
    with pytest.raises(IhprobeError, match="rows hold 6 tokens"):
        recall.icl_score_per_row(logits, tokens, early=1, late=6)


def test_icl_positions_follow_spec():
    assert recall.icl_positions(2048) == (50, 500)
    assert recall.icl_positions(501) == (50, 500)
    assert recall.icl_positions(500) == (50, 400)
    assert recall.icl_positions(64) == (6, 51)
    assert recall.icl_positions(8) == (1, 6)


def test_padded_embedding_rows_are_never_drawn(tokenizer):
    """Pythia pads its embedding past the tokenizer (50304 vs 50277): those rows are untrained."""
    x = repeated_tokens(fake_model(vocab=600, tokenizer=tokenizer), n=50, batch=200)
    assert x.max() < len(tokenizer) == 512
