"""The suite checks ihprobe's array annotations on every call (tests/shape_checks.py)."""

from __future__ import annotations

import pytest
import torch
from jaxtyping import TypeCheckError

from ihprobe.probes.recall import target_ranks


def test_a_wrongly_shaped_tensor_raises_where_it_would_give_silently_wrong_numbers():
    logits = torch.zeros(1, 3, 5)  # [batch query vocab]
    targets = torch.zeros(1, 1, dtype=torch.long)  # one query where logits have three
    # unchecked, torch broadcasts the one target over the three queries without a word
    assert target_ranks.__wrapped__(logits, targets).shape == (1, 3)
    with pytest.raises(TypeCheckError, match="query=3"):
        target_ranks(logits, targets)


def test_a_wrong_dtype_raises():
    with pytest.raises(TypeCheckError):
        target_ranks(torch.zeros(1, 3, 5), torch.zeros(1, 3))  # float targets
