"""What one head adds to copying: the fall of the copy advantage when the head is ablated.

On rows of repeated random tokens ``[s_1..s_n, s_1..s_n]`` the *copy advantage* is the mean
loss of the first half minus that of the second, repeated half: what the model gains from
having seen the tokens before. Zero-ablating a head that copies lowers it; ablating a head
whose removal hurts every position alike (a general-damage head) leaves it about where it was,
because both halves lose the same. :func:`copying_costs` measures that fall for every head of a
layer, so a head can be compared with its own layer's other heads (the *matched* cost).

The *chance* of the advantage itself is its value on control rows whose second half is other
random tokens (nothing to copy): :func:`copy_advantage` returns both.

>>> import torch
>>> halves(torch.tensor([[1.0, 1.0, 0.2, 0.2]]), n=2)  # first-half tokens 1..n-1, then the rest
(1.0, 0.4666666...)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ihprobe.causal.masks import ablate_heads
from ihprobe.probes.recall import token_losses


def halves(losses: torch.Tensor, n: int) -> tuple[float, float]:
    """Mean loss of the first half's tokens ``1..n-1`` and of the second half's ``n..2n-1``
    (``losses``: ``[batch, 2n - 1]`` from :func:`ihprobe.probes.recall.token_losses`)."""
    return float(losses[:, : n - 1].mean()), float(losses[:, n - 1 :].mean())


def _advantage(model, tokens: torch.Tensor, n: int) -> tuple[float, float, float]:
    with torch.no_grad():
        tokens = tokens.to(model.cfg.device)
        first, second = halves(token_losses(model(tokens), tokens), n)
    return first, second, first - second


def control_rows(tokens: torch.Tensor, n: int) -> torch.Tensor:
    """The rows with their second half replaced by another row's first half: the same tokens
    and lengths, nothing repeated on purpose (a row's neighbour, cyclically)."""
    first = tokens[:, :n]
    return torch.cat([first, first.roll(1, dims=0)], dim=1)


@dataclass(frozen=True)
class Advantage:
    """The copy advantage (nats) on repeated rows and on control rows at one length."""

    n: int
    first: float
    second: float
    control: float

    @property
    def advantage(self) -> float:
        return self.first - self.second

    @property
    def above_chance(self) -> float:
        """The advantage less its chance level (the control rows' advantage)."""
        return self.advantage - self.control


def copy_advantage(model, tokens: torch.Tensor, n: int) -> Advantage:
    """The copy advantage of ``tokens`` (rows ``[s, s]`` of half-length ``n``) and of its
    control rows (:func:`control_rows`)."""
    first, second, _ = _advantage(model, tokens, n)
    control = _advantage(model, control_rows(tokens, n), n)[2]
    return Advantage(n, first, second, control)


@dataclass(frozen=True)
class CopyingCost:
    """How far ablating ``head`` lowers the copy advantage (nats), and the same for each other
    head of its layer. ``matched``: the head's fall less the largest fall among the others (a
    head that copies stands out from its layer; a damage-only head does not)."""

    head: tuple[int, int]
    cost: float
    others: dict[int, float]
    ablated_second: float = float("nan")  # the second-half loss with ``head`` ablated

    @property
    def matched(self) -> float:
        return self.cost - max(self.others.values(), default=0.0)


def copying_costs(model, head: tuple[int, int], tokens: torch.Tensor, n: int) -> CopyingCost:
    """Zero-ablate each head of ``head``'s layer in turn on ``tokens`` (repeated rows of
    half-length ``n``) and return the fall of the copy advantage for ``head`` and the others.

    Example:
        >>> cost = copying_costs(model, (1, 0), repeated, n=25)   # doctest: +SKIP
        >>> cost.cost, cost.matched                               # doctest: +SKIP
        (2.1, 1.7)
    """
    layer = head[0]
    clean = _advantage(model, tokens, n)[2]
    falls, seconds = {}, {}
    for h in range(model.cfg.n_heads):
        with ablate_heads(model, [(layer, h)], mode="zero"):
            _, seconds[h], advantage = _advantage(model, tokens, n)
        falls[h] = clean - advantage
    others = {h: v for h, v in falls.items() if h != head[1]}
    return CopyingCost(head, falls[head[1]], others, seconds[head[1]])
