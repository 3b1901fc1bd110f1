"""Synthetic Markov data ([A] experiment 3): transition matrices optimised to chosen properties.

The order-1 matrix is ``softmax(W)`` with ``W`` fitted by Adam so that

- its stationary distribution is the target **marginal** ("uniform", "gaussian" or "zipf"),
  enforced as ``p T = p``;
- its **entropy rate** sum_i p_i H(T_i) hits a target (bits; default half the marginal's entropy);
- rows are not **pointy**: no row puts more than ``max_prob`` on one token;
- with **categoriality**, rows fall in ``n_groups`` contiguous groups whose mean within-group
  cosine similarity is 0.4 ("high") or 0.1 ("low") and across-group similarity 0.1.

``local_dependency=False`` makes every row the marginal (i.i.d. tokens: no IHs can form).
``order=2`` adds a seeded random table ``U`` so that P(w_i | w_{i-2}, w_{i-1}) =
softmax(W[w_{i-1}] + U[w_{i-2}]) (2 V^2 numbers instead of V^3); the targets above hold for the
order-1 part. ``repetition``/``reliability`` put the repetition layer of
:mod:`ihprobe.data.repetition` on top.
Fitted matrices are cached on disk by a hash of the options that determine them.

>>> p = MarkovProducer(batch_size=4, context=32, vocab_size=64, marginal="zipf", fit_steps=50)
>>> p.sample(0).tokens.shape
torch.Size([4, 32])
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from jaxtyping import Float

from ihprobe.core import cache
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.data.base import Batch, Producer, check_probability
from ihprobe.data.blocks import StepBlocks
from ihprobe.data.marginals import MarginalOptions
from ihprobe.data.repetition import RepetitionLayer, check_room
from ihprobe.data.sampling import BigramProcess, inverse_cdf

log = logging.getLogger(__name__)

CATEGORIALITY = {"high": (0.4, 0.1), "low": (0.1, 0.1)}  # (within-group, across-group) cosine
LOSS_WEIGHTS = {"stationary": 100.0, "entropy": 10.0, "pointy": 100.0, "category": 100.0}


def fit_transition(
    target: Float[torch.Tensor, "vocab"],  # noqa: F821 - jaxtyping dim
    *,
    entropy_rate: float,
    max_prob: float = 0.25,
    categoriality: str | None = None,
    n_groups: int = 8,
    steps: int = 1000,
    lr: float = 0.1,
    seed: int = 0,
) -> Float[torch.Tensor, "vocab vocab"]:  # noqa: F821 - jaxtyping dims
    """Fit an order-1 transition matrix to the targets above; returns the row-stochastic matrix.

    >>> from ihprobe.data.marginals import marginal
    >>> t = fit_transition(marginal("uniform", 16), entropy_rate=2.0, steps=300)
    >>> bool(torch.allclose(t.sum(1), torch.ones(16)))
    True

    Runs on one thread: the matrices are small, and on a busy machine intra-op threads make
    each of the thousands of tiny steps wait on the others (measured: 40x slower at load 10).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(target, entropy_rate, max_prob, categoriality, n_groups, steps, lr, seed)
    finally:
        torch.set_num_threads(threads)


def _fit(target, entropy_rate, max_prob, categoriality, n_groups, steps, lr, seed):
    v = len(target)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(v, v, generator=g).requires_grad_()
    opt = torch.optim.Adam([w], lr=lr)
    p = target.double()
    group = torch.arange(v) * n_groups // v
    same = group[:, None] == group[None, :]
    off_diag = ~torch.eye(v, dtype=torch.bool)
    for _ in range(steps):
        t = torch.softmax(w.double(), dim=1)
        loss = LOSS_WEIGHTS["stationary"] * ((p @ t - p) ** 2).sum() / (p**2).sum()
        h_rows = -(t * torch.log2(t.clamp_min(1e-30))).sum(1)
        loss = loss + LOSS_WEIGHTS["entropy"] * ((p * h_rows).sum() - entropy_rate) ** 2
        loss = loss + LOSS_WEIGHTS["pointy"] * torch.relu(t.max(1).values - max_prob).pow(2).sum()
        if categoriality is not None:
            within, across = CATEGORIALITY[categoriality]
            cos = _cosines(t)
            loss = loss + LOSS_WEIGHTS["category"] * (
                (cos[same & off_diag].mean() - within) ** 2 + (cos[~same].mean() - across) ** 2
            )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.softmax(w.detach(), dim=1).float()


def group_cosines(transition: torch.Tensor, n_groups: int) -> tuple[float, float]:
    """Mean cosine similarity of rows within the same group and across groups."""
    v = len(transition)
    group = torch.arange(v) * n_groups // v
    same = group[:, None] == group[None, :]
    cos = _cosines(transition.double())
    return float(cos[same & ~torch.eye(v, dtype=torch.bool)].mean()), float(cos[~same].mean())


def _cosines(t: torch.Tensor) -> torch.Tensor:
    n = t / t.norm(dim=1, keepdim=True)
    return n @ n.T


class Order2Process:
    """P(w_i | w_{i-2}, w_{i-1}) = softmax(W[w_{i-1}] + U[w_{i-2}]), rows computed on demand
    as the product exp(W[w_{i-1}]) * exp(U[w_{i-2}]) of two precomputed tables."""

    def __init__(self, logits: np.ndarray, second: np.ndarray):
        self.first = np.exp(logits - logits.max(1, keepdims=True))
        self.second = np.exp(second - second.max(1, keepdims=True))
        self.vocab_size = len(logits)

    def rows(self, prev: np.ndarray, prev2: np.ndarray) -> np.ndarray:
        """Unnormalised next-token weights ``[n, vocab]``."""
        return self.first[prev] * self.second[prev2]

    def draw(self, prev, prev2, u):
        w = self.rows(prev, prev2)
        return np.stack([inverse_cdf(w, u[:, k]) for k in range(u.shape[1])], axis=1)

    def weights(self, prev, prev2, tokens):
        return np.take_along_axis(self.rows(prev, prev2), tokens, axis=1)


@dataclass(frozen=True)
class MarkovOptions(MarginalOptions):
    """The Markov producer's options (see the module docstring).

    Args:
        vocab_size: number of token ids (no special tokens).
        marginal: target stationary distribution ("uniform", "gaussian", "zipf" or weights).
        zipf_exponent: exponent of the "zipf" marginal.
        entropy_rate: target entropy rate in bits; None: half the marginal's entropy.
        max_prob: upper bound on any single transition probability (low pointiness).
        categoriality: None, "high" or "low".
        n_groups: number of row groups for categoriality.
        local_dependency: False samples i.i.d. from the marginal.
        order: 1 or 2.
        order2_scale: standard deviation of the w_{i-2} logit table for order 2.
        repetition, reliability: when both are given, the repetition layer on top.
        matrix_seed: seed of the matrix fit (the data seed only affects sampling).
        fit_steps, fit_lr: Adam settings of the fit.
    """

    entropy_rate: float | None = None
    max_prob: float = 0.25
    categoriality: Literal["high", "low"] | None = None
    n_groups: int = 8
    local_dependency: bool = True
    order: int = 1
    order2_scale: float = 1.0
    repetition: float | None = None
    reliability: float | None = None
    matrix_seed: int = 0
    fit_steps: int = 1000
    fit_lr: float = 0.1

    def check(self) -> None:
        if self.order not in (1, 2):
            raise IhprobeError(f"order={self.order}: ihprobe supports order 1 and order 2.")
        if not 1 <= self.n_groups <= self.vocab_size:
            raise IhprobeError(f"n_groups={self.n_groups} must be between 1 and vocab_size.")
        if (self.repetition is None) != (self.reliability is None):
            raise IhprobeError("pass both repetition and reliability (or neither).")
        high = np.log2(self.vocab_size)
        if self.entropy_rate is not None and not 0 <= self.entropy_rate <= high:
            raise IhprobeError(
                f"entropy_rate={self.entropy_rate} bits is outside [0, log2(vocab_size)="
                f"{high:.2f}]."
            )
        check_probability("max_prob", self.max_prob)
        for name in ("repetition", "reliability"):
            if getattr(self, name) is not None:
                check_probability(name, getattr(self, name))


# With the marginal, the options that determine a fitted matrix -> fit_transition's arguments.
FIT = {
    "entropy_rate": "entropy_rate",
    "max_prob": "max_prob",
    "categoriality": "categoriality",
    "n_groups": "n_groups",
    "matrix_seed": "seed",
    "fit_steps": "steps",
    "fit_lr": "lr",
}


class MarkovProducer(Producer):
    """Rows sampled from an optimised synthetic Markov chain (see the module docstring).

    Options: :class:`MarkovOptions`. The fitted matrix is cached on disk; ``config()`` reports
    the entropy rate it was fitted to, also when the default (half the marginal's) was used.
    """

    name = "markov"
    Options = MarkovOptions
    options: MarkovOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        o = self.options
        self.vocab_size = o.vocab_size
        self.special = {}
        self.target = o.probs()
        if o.entropy_rate is None:  # resolved here, so config() reports the rate it fitted to
            h = float(-(self.target * torch.log2(self.target.clamp_min(1e-30))).sum())
            self.options = o = replace(o, entropy_rate=h / 2)
        if o.repetition is not None:
            check_room(self.vocab_size, self.context)
        self.transition = self._transition()
        if o.order == 2:
            g = torch.Generator().manual_seed(o.matrix_seed + 1)
            second = torch.randn(self.vocab_size, self.vocab_size, generator=g) * o.order2_scale
            log_t = torch.log(self.transition.clamp_min(1e-30)).double().numpy()
            self.process = Order2Process(log_t, second.double().numpy())
        else:
            self.process = BigramProcess(self.transition)
        self.layer = None
        self.blocks = StepBlocks(self, self._draw, self._generate)
        if o.repetition is not None:
            self.measure_from = 0.5  # the layer's first half never repeats
            self.layer = RepetitionLayer(
                self, self.process, self.target, o.repetition, o.reliability
            )

    def _transition(self) -> torch.Tensor:
        o = self.options
        if not o.local_dependency:
            return self.target.expand(self.vocab_size, -1).clone()
        every = o.to_json()
        spec = {k: every[k] for k in ("vocab_size", "marginal", "zipf_exponent", *FIT)}

        def build(directory):
            log.info(
                "fitting a %d x %d Markov matrix (%d Adam steps)",
                self.vocab_size,
                self.vocab_size,
                o.fit_steps,
            )
            t = fit_transition(self.target, **{arg: every[k] for k, arg in FIT.items()})
            np.save(directory / "transition.npy", t.numpy())

        path = cache.entry("markov", spec, build, check=lambda d: _checked_transition(d, spec))
        return torch.from_numpy(_checked_transition(path, spec))

    def sample(self, step: int) -> Batch:
        if self.layer is not None:
            return self.layer.sample(step)
        return Batch(tokens=self.blocks.rows(step)[0])

    def _draw(self, g: torch.Generator) -> tuple[np.ndarray]:
        u = torch.rand(self.batch_size, self.context, generator=g, dtype=torch.float64)
        return (u.clamp_(1e-12, 1 - 1e-12).numpy(),)

    def _generate(self, u: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        n, c = u.shape
        tokens = np.empty((n, c), dtype=np.int64)
        start = np.broadcast_to(self.target.double().numpy(), (n, self.vocab_size))
        tokens[:, 0] = inverse_cdf(start, u[:, 0])
        prev2 = tokens[:, 0]
        for i in range(1, c):
            prev = tokens[:, i - 1]
            tokens[:, i] = self.process.draw(prev, prev2, u[:, i : i + 1])[:, 0]
            prev2 = prev
        return torch.from_numpy(tokens), np.zeros((n, 0))

    def tokenizer(self):
        return id_tokenizer(self.vocab_size)


def _checked_transition(directory: Path, spec: dict) -> np.ndarray:
    """The cached transition matrix, or ValueError unless it is ``[vocab, vocab]``, finite,
    non-negative and row-stochastic (a cache entry edited or cut short is fitted again)."""
    t = np.load(directory / "transition.npy", allow_pickle=False)
    v = spec["vocab_size"]
    if t.shape != (v, v) or not np.isfinite(t).all() or (t < 0).any():
        raise ValueError(f"not a finite non-negative {v} x {v} matrix")
    if not np.allclose(t.sum(1), 1.0, atol=1e-4):
        raise ValueError("its rows do not sum to 1")
    return t
