"""The producer interface every producer shares: registry, config round trip, determinism, resume,
and clear errors for bad options. Producer-specific science lives in tests/test_data_*.py."""

from __future__ import annotations

import json

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import PRODUCERS, make_producer
from ihprobe.data.marginals import marginal


def test_registry_names():
    assert set(PRODUCERS) >= {"iid"}


def test_iid_determinism_resume_and_config_round_trip():
    p = make_producer("iid", batch_size=8, context=32, seed=3, vocab_size=50)
    a = [p.sample(s).tokens for s in range(4)]
    # a fresh producer asked for step 2 first (a resumed run) gives the same batch
    q = make_producer("iid", **p.config())
    assert torch.equal(q.sample(2).tokens, a[2])
    assert torch.equal(q.sample(0).tokens, a[0])
    assert not torch.equal(a[0], a[1])  # steps differ
    other = make_producer("iid", batch_size=8, context=32, seed=4, vocab_size=50)
    assert not torch.equal(other.sample(0).tokens, a[0])  # seeds differ
    assert a[0].dtype == torch.int64 and a[0].shape == (8, 32)
    assert int(torch.stack(a).max()) < 50


def test_config_with_name_key_is_accepted():
    p = make_producer("iid", batch_size=2, context=8, vocab_size=10)
    q = make_producer("iid", name="iid", **p.config())
    assert torch.equal(p.sample(1).tokens, q.sample(1).tokens)


@pytest.mark.parametrize("shape", ["uniform", "zipf", "gaussian"])
def test_iid_realises_its_marginal(shape):
    p = make_producer("iid", batch_size=64, context=256, vocab_size=32, marginal=shape)
    counts = torch.bincount(p.sample(0).tokens.flatten(), minlength=32).float()
    freq = counts / counts.sum()
    assert (freq - marginal(shape, 32)).abs().max() < 0.01


def test_marginal_shapes_analytic():
    z = marginal("zipf", 10)
    assert torch.allclose(z[0] / z[4], torch.tensor(5.0))
    g = marginal("gaussian", 64)
    assert int(g.argmax()) == 32
    assert torch.allclose(marginal("uniform", 4), torch.full((4,), 0.25))
    assert torch.allclose(marginal([1, 3], 2), torch.tensor([0.25, 0.75]))


def test_bad_options_raise_clear_errors():
    with pytest.raises(IhprobeError, match="unknown producer"):
        make_producer("nope", batch_size=2, context=8)
    with pytest.raises(IhprobeError, match="has no option colour"):
        make_producer("iid", batch_size=2, context=8, colour="red")
    with pytest.raises(IhprobeError, match="unknown marginal"):
        make_producer("iid", batch_size=2, context=8, marginal="cauchy")
    with pytest.raises(IhprobeError, match="non-negative"):
        marginal([1, -1], 2)
    with pytest.raises(IhprobeError, match="not 'markov'"):
        make_producer("markov", name="iid", batch_size=2, context=8)


# every producer, with small options so the whole set stays fast
SMALL = {
    "natural": {"vocab_size": 280},
    "bi-induct": {"vocab_size": 280, "snippet_length": 5},
    "semi-natural": {"vocab_size": 280},
    "markov": {"vocab_size": 64, "fit_steps": 50},
    "iid": {"vocab_size": 64},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_producer_is_deterministic_resumable_and_saves_a_tokenizer(name, tmp_path, cache_dir):
    from transformers import AutoTokenizer

    p = make_producer(name, batch_size=4, context=32, seed=9, total_steps=50, **SMALL[name])
    later = p.sample(17)
    first = p.sample(0)
    resumed = make_producer(name, **p.config())  # a restarted run asks for step 17 first
    assert torch.equal(resumed.sample(17).tokens, later.tokens)
    assert resumed.sample(17).info == later.info
    assert torch.equal(resumed.sample(0).tokens, first.tokens)
    assert not torch.equal(first.tokens, later.tokens)
    assert first.tokens.shape == (4, 32) and first.tokens.dtype == torch.int64
    assert 0 <= int(first.tokens.min()) and int(first.tokens.max()) < p.vocab_size
    json.dumps(p.config())
    p.save_tokenizer(tmp_path / "tok")
    assert len(AutoTokenizer.from_pretrained(str(tmp_path / "tok"))) == p.vocab_size
