"""Marginal shapes over token ids: uniform, Gaussian over the index, Zipf over the rank.

These are the target unigram distributions of the i.i.d. control and the synthetic Markov
producer ([A] experiment 3): Gaussian has mean V/2 and sd V/8; Zipf is ``1 / rank**exponent``.

>>> p = marginal("zipf", 4)
>>> [round(x, 3) for x in p.tolist()]
[0.48, 0.24, 0.16, 0.12]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float

from ihprobe.core.errors import IhprobeError
from ihprobe.data.options import ProducerOptions

SHAPES = ("uniform", "gaussian", "zipf")


def marginal(
    shape: str | Sequence[float], vocab_size: int, *, zipf_exponent: float = 1.0
) -> Float[torch.Tensor, "vocab"]:  # noqa: F821 - a jaxtyping dim, not a name
    """A probability vector of length ``vocab_size`` with the named shape (or the given weights).

    Args:
        shape: "uniform", "gaussian", "zipf", or explicit non-negative weights (normalised here).
        vocab_size: number of token ids.
        zipf_exponent: s in ``p(rank) ~ rank**-s`` for "zipf".
    """
    if vocab_size < 1:
        raise IhprobeError(f"vocab_size must be at least 1, got {vocab_size}.")
    idx = torch.arange(vocab_size, dtype=torch.float64)
    if isinstance(shape, str):
        if shape == "uniform":
            w = torch.ones(vocab_size, dtype=torch.float64)
        elif shape == "gaussian":
            w = torch.exp(-0.5 * ((idx - vocab_size / 2) / (vocab_size / 8)) ** 2)
        elif shape == "zipf":
            w = (idx + 1) ** -float(zipf_exponent)
        else:
            raise IhprobeError(
                f"unknown marginal shape {shape!r}: use one of {', '.join(SHAPES)} "
                "or a list of weights."
            )
    else:
        w = torch.as_tensor(list(shape), dtype=torch.float64)
        if w.shape != (vocab_size,):
            raise IhprobeError(
                f"marginal weights have {w.numel()} entries but vocab_size is {vocab_size}: "
                "pass one weight per token id."
            )
        if not torch.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise IhprobeError("marginal weights must be finite, non-negative and not all zero.")
    return (w / w.sum()).to(torch.float32)


@dataclass(frozen=True)
class MarginalOptions(ProducerOptions):
    """A vocabulary of ``vocab_size`` ids (none special) and a marginal over it.

    Args:
        vocab_size: number of token ids.
        marginal: "uniform", "gaussian", "zipf" or explicit weights (one per id).
        zipf_exponent: exponent of the "zipf" shape.

    >>> MarginalOptions(vocab_size=4, marginal="zipf").probs().argmax().item()
    0
    """

    vocab_size: int = 128
    marginal: str | tuple[float, ...] = "uniform"
    zipf_exponent: float = 1.0

    def probs(self) -> Float[torch.Tensor, "vocab"]:  # noqa: F821 - a jaxtyping dim
        """The marginal as a probability vector."""
        return marginal(self.marginal, self.vocab_size, zipf_exponent=self.zipf_exponent)
