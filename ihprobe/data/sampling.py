"""Vectorised categorical draws: one token per row from per-row weights.

:class:`BigramProcess` draws from rows of a transition matrix in O(1) with Walker alias tables;
:func:`inverse_cdf` draws from arbitrary (unnormalised, possibly restricted) weights.

>>> import numpy as np
>>> inverse_cdf(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 3.0]]), np.array([0.5, 0.9])).tolist()
[1, 2]
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from jaxtyping import Float


class BaseProcess(Protocol):
    """The process the repetition layer sits on: next-token weights given the previous tokens."""

    def draw(self, prev: np.ndarray, prev2: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Unrestricted next tokens ``[n, k]``, one per uniform in ``u`` ``[n, k]``."""

    def weights(self, prev: np.ndarray, prev2: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Unnormalised weights ``[n, m]`` of ``tokens`` ``[n, m]`` following (prev2, prev)."""


class BigramProcess:
    """An order-1 transition matrix; draws in O(1) from per-row alias tables (Walker/Vose)."""

    def __init__(self, transition: Float[torch.Tensor, "vocab vocab"]):  # noqa: F821
        t = transition.double().numpy()
        self.vocab_size = len(t)
        self.matrix = t
        self.accept, self.alias = alias_tables(t / t.sum(1, keepdims=True))

    def draw(self, prev, prev2, u):
        scaled = u * self.vocab_size
        col = scaled.astype(np.int64)
        keep = (scaled - col) < self.accept[prev[:, None], col]
        return np.where(keep, col, self.alias[prev[:, None], col])

    def weights(self, prev, prev2, tokens):
        return self.matrix[prev[:, None], tokens]


def alias_tables(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker alias tables of every row of a row-stochastic matrix, built for all rows at once.

    A draw from row r: column k uniform, keep k with probability ``accept[r, k]``, else take
    ``alias[r, k]``. Vose's pairing, vectorised over rows: each pass settles one cell per row,
    a small one (scaled probability <= 1) against a large one, walking the sorted cells from
    both ends; a large cell that drops below 1 is settled next.

    >>> accept, alias = alias_tables(np.array([[0.25, 0.75]]))
    >>> accept.tolist(), alias.tolist()       # column 0 kept half the time, else column 1
    ([[0.5, 1.0]], [[1, 1]])
    """
    n, v = probs.shape
    rows = np.arange(n)
    q = probs * v
    order = q.argsort(1)
    accept = np.ones((n, v))
    alias = np.tile(np.arange(v), (n, 1))
    lo, hi = np.zeros(n, dtype=np.int64), np.full(n, v - 1)
    dropped = np.full(n, -1)  # a former large cell now below 1, settled in the next pass
    for _ in range(v - 1):
        large = order[rows, hi]
        use_dropped = dropped >= 0
        small = np.where(use_dropped, dropped, order[rows, lo])
        lo += ~use_dropped
        accept[rows, small] = np.clip(q[rows, small], 0.0, 1.0)
        alias[rows, small] = large
        q[rows, large] -= 1.0 - q[rows, small]
        drop = q[rows, large] < 1.0
        dropped = np.where(drop, large, -1)
        hi -= drop
    return accept, alias


def inverse_cdf(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Per row, the index drawn with probability proportional to ``weights`` (u in (0, 1))."""
    cdf = np.cumsum(weights, axis=1)
    return np.minimum((cdf < u[:, None] * cdf[:, -1:]).sum(1), weights.shape[1] - 1)
