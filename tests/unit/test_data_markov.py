"""Synthetic Markov producer: fitted matrices hit their targets; dependency structure is real."""

from __future__ import annotations

import math

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer
from ihprobe.data import markov as markov_mod
from ihprobe.data.markov import group_cosines
from ihprobe.data.stats import corpus_stats, repetition_reliability

V = 32


def markov(**kw):
    opts = dict(batch_size=128, context=64, vocab_size=V, fit_steps=300)
    opts.update(kw)
    return make_producer("markov", **opts)


def tokens(p, batches=4):
    return torch.cat([p.sample(s).tokens for s in range(batches)])


def entropy_bits(counts):
    p = counts[counts > 0].double() / counts.sum()
    return float(-(p * torch.log2(p)).sum())


def conditional_entropy(x, order):
    """H(w_i | previous `order` tokens) in bits, plug-in estimate over all rows."""
    cols = [x[:, k : x.shape[1] - order + k] for k in range(order + 1)]
    key = torch.zeros_like(cols[0])
    for c in cols:
        key = key * V + c
    ctx = torch.zeros_like(cols[0])
    for c in cols[:-1]:
        ctx = ctx * V + c
    return entropy_bits(torch.bincount(key.flatten())) - entropy_bits(torch.bincount(ctx.flatten()))


def test_zipf_marginal_is_reached():
    p = markov(marginal="zipf", vocab_size=64)  # at V=32 Zipf's p(1)=0.25 meets max_prob
    stats = corpus_stats(tokens(p), 64)
    assert abs(stats["zipf_exponent"] - 1.0) < 0.15
    # the target is the chain's stationary distribution
    assert (p.target @ p.transition - p.target).abs().sum() < 0.1


def test_uniform_marginal_is_flat_and_entropy_rate_is_hit():
    p = markov(marginal="uniform", entropy_rate=3.0)
    x = tokens(p)
    freq = torch.bincount(x.flatten(), minlength=V).float() / x.numel()
    assert freq.max() / freq.min() < 1.5
    assert abs(corpus_stats(x, 64)["zipf_exponent"]) < 0.1
    t = p.transition
    rate = float((p.target * -(t * torch.log2(t)).sum(1)).sum())
    assert rate == pytest.approx(3.0, abs=0.1)
    assert conditional_entropy(x, 1) == pytest.approx(3.0, abs=0.15)  # measured on samples
    assert float(t.max()) <= 0.25 + 0.02  # low pointiness


@pytest.mark.parametrize("level,within", [("high", 0.4), ("low", 0.1)])
def test_categoriality_targets(level, within):
    p = markov(marginal="uniform", categoriality=level, n_groups=4)
    w, a = group_cosines(p.transition, 4)
    assert w == pytest.approx(within, abs=0.05)
    assert a == pytest.approx(0.1, abs=0.05)


def test_local_dependency_off_has_no_bigram_information():
    x_iid = tokens(markov(marginal="zipf", local_dependency=False))
    x_dep = tokens(markov(marginal="zipf"))
    mi = [
        corpus_stats(x, 64)["unigram_entropy"] - corpus_stats(x, 64)["bigram_entropy"]
        for x in (x_iid, x_dep)
    ]
    bias = (V - 1) ** 2 / (2 * x_iid.numel() * math.log(2))  # plug-in bias of the MI estimate
    assert mi[0] < 2 * bias + 0.01
    assert mi[1] > 1.0


def test_order_two_depends_on_the_token_before_last():
    x1 = tokens(markov(order=1), batches=8)
    x2 = tokens(markov(order=2, order2_scale=1.5), batches=8)
    # I(w_i ; w_{i-2} | w_{i-1}) = H(w_i | w_{i-1}) - H(w_i | w_{i-1}, w_{i-2})
    cmi = [conditional_entropy(x, 1) - conditional_entropy(x, 2) for x in (x1, x2)]
    assert cmi[1] > cmi[0] + 0.3


@pytest.mark.parametrize("order", [1, 2])
def test_repetition_layer_on_top(order):
    p = markov(repetition=0.8, reliability=0.8, batch_size=256, context=24, order=order)
    rep, rel = repetition_reliability(p.sample(0).tokens, 24, start=12)
    assert rel == pytest.approx(0.8, abs=0.03)
    assert p.sample(0).info["reliability"] == pytest.approx(rel)


def test_fitted_matrix_is_cached_and_sampling_is_deterministic(monkeypatch):
    p = markov(marginal="gaussian", seed=1)
    a = p.sample(3).tokens

    def fail(*args, **kwargs):
        raise AssertionError("refitted a matrix the cache holds")

    monkeypatch.setattr(markov_mod, "fit_transition", fail)
    q = make_producer("markov", **p.config())
    assert torch.equal(q.transition, p.transition)
    assert torch.equal(q.sample(3).tokens, a)
    assert not torch.equal(q.sample(4).tokens, a)
    # the data seed changes the samples, not the matrix
    r = make_producer("markov", **{**p.config(), "seed": 2})
    assert torch.equal(r.transition, p.transition) and not torch.equal(r.sample(3).tokens, a)


def test_bad_inputs():
    with pytest.raises(IhprobeError, match="order"):
        markov(order=3)
    with pytest.raises(IhprobeError, match="not a probability"):
        markov(repetition=1.2, reliability=0.5)
    with pytest.raises(IhprobeError, match="both"):
        markov(repetition=0.5)
    with pytest.raises(IhprobeError, match="entropy_rate"):
        markov(entropy_rate=9.0)
    with pytest.raises(IhprobeError, match="larger vocab_size"):
        markov(repetition=0.5, reliability=0.5, context=64, vocab_size=40)
