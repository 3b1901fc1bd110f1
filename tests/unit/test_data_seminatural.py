"""Semi-natural producer: realised reliability and repetition are the requested ones."""

from __future__ import annotations

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer
from ihprobe.data.repetition import steady_state_repetition
from ihprobe.data.seminatural import bigram_matrix
from ihprobe.data.stats import repeat_structure, repetition_reliability


def rows(p_a, p_b, *, context, batches, batch_size=64, seed=0):
    p = make_producer(
        "semi-natural",
        batch_size=batch_size,
        context=context,
        seed=seed,
        repetition=p_a,
        reliability=p_b,
        vocab_size=300,
    )
    return p, torch.cat([p.sample(s).tokens for s in range(batches)])


@pytest.mark.parametrize("p_a,p_b", [(0.9, 0.9), (0.1, 0.9), (0.5, 0.5), (0.9, 0.1)])
def test_realised_reliability_and_repetition(p_a, p_b):
    p, x = rows(p_a, p_b, context=128, batches=1, batch_size=512)
    rel = repetition_reliability(x, 128, start=64)[1]
    assert abs(rel - p_b) <= 0.02
    # the repeat / no-repeat chain has the transition probabilities the producer promises ...
    q = p_a / (1 + p_b)
    is_repeat, _ = repeat_structure(x)
    before, after = is_repeat[:, 64:-1], is_repeat[:, 65:]
    assert abs(float((before & after).sum() / before.sum()) - (p_b + (1 - p_b) * q)) <= 0.02
    assert abs(float((~before & after).sum() / (~before).sum()) - q) <= 0.02
    # ... so in the last quarter of a row (past the transient) repetition is the steady state
    rep = repetition_reliability(x, 128, start=96)[0]
    assert abs(rep - steady_state_repetition(p_a, p_b)) <= 0.03
    assert not is_repeat[:, :64].any()  # the first half never re-uses a token
    assert not torch.isin(x, torch.tensor(list(p.special.values()))).any()


def test_steady_state_formula_analytic():
    assert steady_state_repetition(0.5, 0.5) == pytest.approx(0.5)
    assert steady_state_repetition(0.1, 0.9) == pytest.approx(0.1 / (1 - 0.81 + 0.09))
    assert steady_state_repetition(0.0, 0.7) == 0.0


def test_info_reports_realised_values():
    # the producer's own tallies agree with the independent measurement in ihprobe.data.stats
    p, _ = rows(0.7, 0.6, context=64, batches=1, batch_size=32)
    for step in (0, 21):
        b = p.sample(step)
        rep, rel = repetition_reliability(b.tokens, 64, start=32)
        assert b.info["repetition"] == pytest.approx(rep)
        assert b.info["reliability"] == pytest.approx(rel)


def test_determinism_and_resume():
    p, x = rows(0.7, 0.3, context=32, batches=3, batch_size=8, seed=5)
    q = make_producer("semi-natural", **p.config())
    assert torch.equal(q.sample(2).tokens, x[16:24])
    assert not torch.equal(q.sample(1).tokens, x[16:24])
    # a batch does not depend on which block of steps it was generated with
    r = make_producer("semi-natural", **{**p.config(), "batch_size": 8})
    assert torch.equal(r.sample(100).tokens, r.sample(100).tokens)
    far = r.sample(100).tokens
    r.sample(0)
    assert torch.equal(make_producer("semi-natural", **p.config()).sample(100).tokens, far)
    other_seed = make_producer("semi-natural", **{**p.config(), "seed": 6})
    assert not torch.equal(other_seed.sample(2).tokens, x[16:24])


def test_base_rows_follow_the_bigram_matrix():
    # with no repetition the first token after a fresh token follows the (restricted) bigram row
    stream = torch.tensor([2, 3, 2, 3, 2, 4] * 50)
    t = bigram_matrix(stream, 5, smoothing=0.01)
    assert t[2, 3] > 0.6 and t[2, 4] > 0.3 and torch.allclose(t.sum(1), torch.ones(5))


def test_bad_inputs():
    with pytest.raises(IhprobeError, match="not a probability"):
        make_producer("semi-natural", batch_size=2, context=8, repetition=1.5, vocab_size=300)
    with pytest.raises(IhprobeError, match="not a probability"):
        make_producer("semi-natural", batch_size=2, context=8, reliability=-0.1, vocab_size=300)
    with pytest.raises(IhprobeError, match="larger vocab_size"):
        make_producer("semi-natural", batch_size=2, context=400, vocab_size=300)
