"""Bi-Induct: snippets are what they claim, replace background tokens, and anneal linearly."""

from __future__ import annotations

import json

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer


def iid_bi(**kw):
    opts = dict(batch_size=64, context=64, total_steps=100, base="iid", vocab_size=100)
    opts.update(kw)
    return make_producer("bi-induct", **opts)


def snippets(tokens, sep, n):
    """(S, copy, row, start) of every snippet, found from its SEP token."""
    out = []
    for r, p in (tokens == sep).nonzero().tolist():
        out.append((tokens[r, p - n : p], tokens[r, p + 1 : p + 1 + n], r, p - n))
    return out


def test_snippets_are_forward_or_backward_copies_balanced():
    p = iid_bi(snippet_source="random", snippet_length=8, m0=0.5)
    sep = p.special["sep"]
    assert sep == 100 and p.vocab_size == 101  # a dedicated id beyond the background's
    fwd = bwd = 0
    for step in range(4):
        for s, copy, _, _ in snippets(p.sample(step).tokens, sep, 8):
            assert len(set(s.tolist())) == 8  # distinct random tokens, never SEP
            if torch.equal(copy, s):
                fwd += 1
            else:
                assert torch.equal(copy, s.flip(0))
                bwd += 1
    assert fwd + bwd > 200
    assert abs(fwd / (fwd + bwd) - 0.5) < 0.08


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_one_direction_and_natural_snippet_source(direction):
    p = make_producer(
        "bi-induct",
        batch_size=32,
        context=64,
        total_steps=100,
        vocab_size=300,
        direction=direction,
        m0=0.5,
    )
    base = p.base.sample(3).tokens
    b = p.sample(3)
    found = snippets(b.tokens, p.special["sep"], 20)
    assert found
    for s, copy, r, start in found:
        # S is the natural text the snippet was written over
        assert torch.equal(s, base[r, start : start + 20])
        assert torch.equal(copy, s if direction == "forward" else s.flip(0))
    assert b.info["forward_fraction"] == (1.0 if direction == "forward" else 0.0)


def test_snippets_replace_background_tokens_only_in_their_span():
    p = iid_bi(snippet_length=6)
    base, out = p.base.sample(7).tokens, p.sample(7).tokens
    assert out.shape == base.shape == (64, 64)  # same tokens per update
    inside = torch.zeros_like(out, dtype=torch.bool)
    for _, _, r, start in snippets(out, p.special["sep"], 6):
        inside[r, start : start + 13] = True
    assert torch.equal(out[~inside], base[~inside])
    assert inside.float().mean().item() == pytest.approx(p.sample(7).info["snippet_fraction"])


def test_snippet_fraction_follows_linear_anneal():
    p = iid_bi(batch_size=256, snippet_length=5, m0=0.5, total_steps=100)
    for step, m in [(0, 0.5), (50, 0.25), (80, 0.1), (100, 0.0), (150, 0.0)]:
        frac = sum(p.sample(step + d).info["snippet_fraction"] for d in range(3)) / 3
        assert p.rate(step) == pytest.approx(m)
        assert abs(frac - m) < 0.03, (step, frac)
    assert p.sample(100).info["snippet_fraction"] == 0.0
    json.dumps(p.sample(100).info, allow_nan=False)  # strict JSON for the trainer's logs


def test_sequence_level_mixing_fills_whole_rows():
    p = iid_bi(batch_size=256, snippet_length=5, mixing="sequence", m0=0.4)
    b = p.sample(0)
    per_row = (b.tokens == p.special["sep"]).sum(1)
    assert set(per_row.unique().tolist()) <= {0, 64 // 11}
    assert abs((per_row > 0).float().mean().item() - 0.4) < 0.08


def test_determinism_and_resume():
    p = iid_bi(seed=2)
    a = p.sample(5)
    q = make_producer("bi-induct", **p.config())
    assert torch.equal(q.sample(5).tokens, a.tokens) and q.sample(5).info == a.info
    assert not torch.equal(q.sample(6).tokens, a.tokens)


def test_bad_inputs():
    with pytest.raises(IhprobeError, match="too few"):
        iid_bi(vocab_size=10, snippet_source="random", snippet_length=20)
    with pytest.raises(IhprobeError, match="does not fit"):
        iid_bi(context=32, snippet_length=20)
    with pytest.raises(IhprobeError, match="not a probability"):
        iid_bi(m0=1.5)
    with pytest.raises(IhprobeError, match="mixing"):
        iid_bi(mixing="word")
    with pytest.raises(IhprobeError, match="has no option"):
        iid_bi(colour="red")
