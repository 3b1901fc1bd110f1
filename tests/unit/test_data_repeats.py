"""The repeats producer: rows turn periodic at a drawn start with a drawn period."""

from __future__ import annotations

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer


def _period_and_start(row: torch.Tensor, low: int, high: int) -> tuple[int, int]:
    """The smallest (period, start) for which ``row`` is periodic from ``start`` on."""
    for start in range(len(row)):
        for period in range(low, high + 1):
            tail = row[start + period :]
            if len(tail) and bool((tail == row[start : start + len(tail)]).all()):
                return period, start
    raise AssertionError("row is not periodic")


def test_rows_repeat_with_varying_periods_and_starts():
    p = make_producer(
        "repeats",
        batch_size=64,
        context=64,
        base="iid",
        vocab_size=5000,
        period=(8, 32),
        start=(0, 16),
    )
    tokens = p.sample(0).tokens
    found = [_period_and_start(row, 8, 32) for row in tokens]
    periods = {period for period, _ in found}
    starts = {start for _, start in found}
    assert all(8 <= period <= 32 for period in periods) and len(periods) > 10
    assert all(0 <= start <= 16 for start in starts) and len(starts) > 5


def test_natural_background_deterministic_and_rebuilt_from_config(cache_dir):
    p = make_producer("repeats", batch_size=8, context=64, seed=3, vocab_size=300)
    a, b = p.sample(5), p.sample(5)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, p.sample(6).tokens)
    q = make_producer("repeats", **p.config())
    assert torch.equal(q.sample(5).tokens, a.tokens)
    assert p.vocab_size == 300 and p.tokenizer() is not None
    assert 0.3 < a.info["repeated_fraction"] < 1.0


@pytest.mark.parametrize("bad", [{"period": (0, 4)}, {"period": (9, 8)}, {"start": (0, 99)}])
def test_bad_ranges_say_what_fits(bad):
    with pytest.raises(IhprobeError, match="must satisfy"):
        make_producer("repeats", batch_size=2, context=32, base="iid", vocab_size=50, **bad)
