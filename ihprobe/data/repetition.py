"""The repetition/reliability process ([A] experiment 2) on top of any base process.

Rows of length C: the first half never re-uses a token. In the second half, with p_a
(repetition) and p_b (reliability), q = p_a / (1 + p_b):

- after a repeated token A: with p_b copy B, the token that followed A's most recent earlier
  occurrence; else with q repeat an earlier token other than B; else emit a fresh token;
- after a fresh token: with q repeat an earlier token, else a fresh one.

Every draw uses the base process's row restricted to its candidates. The realised repetition of
the second half is p_a / (1 - p_b**2 + p_a p_b) in steady state (p_a only when p_a = p_b); the
realised reliability is p_b. Both are tallied while generating and reported in ``Batch.info``.
The semi-natural producer puts it on a bigram model of text, the Markov producer on its chain.

>>> round(steady_state_repetition(0.9, 0.5), 3)
0.75
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float, Int

from ihprobe.core.errors import IhprobeError
from ihprobe.data.base import Batch, Producer
from ihprobe.data.blocks import StepBlocks
from ihprobe.data.sampling import BaseProcess, inverse_cdf

REJECTION_ROUNDS = 3  # unrestricted draws tried per fresh token before an exact restricted one


def steady_state_repetition(repetition: float, reliability: float) -> float:
    """The second half's long-run share of repeated tokens: p_a / (1 - p_b^2 + p_a p_b)."""
    pa, pb = repetition, reliability
    return pa / (1 - pb * pb + pa * pb) if pa > 0 else 0.0


def check_room(usable: int, context: int) -> None:
    """Raise unless ``usable`` token ids can fill a row whose tokens may all be distinct."""
    if usable <= context or context < 4:
        raise IhprobeError(
            f"{usable} usable token ids cannot fill a row of {context} tokens whose first half "
            "never repeats: use a larger vocab_size or a shorter context (at least 4)."
        )


def uniforms(
    generator: torch.Generator, batch_size: int, context: int
) -> tuple[np.ndarray, np.ndarray]:
    """The random numbers :func:`generate` consumes for ``batch_size`` rows, in (0, 1):
    one branch choice per position and ``REJECTION_ROUNDS + 1`` token draws per position."""
    b, c = batch_size, context
    u_choice = torch.rand(b, c, generator=generator, dtype=torch.float64).numpy()
    u_draw = torch.rand(
        b, c, REJECTION_ROUNDS + 1, generator=generator, dtype=torch.float64
    ).numpy()
    return u_choice, np.clip(u_draw, 1e-12, 1 - 1e-12)


def generate(
    base: BaseProcess,
    start: Float[torch.Tensor, "vocab"],  # noqa: F821 - jaxtyping dim
    *,
    repetition: float,
    reliability: float,
    u_choice: np.ndarray,
    u_draw: np.ndarray,
) -> tuple[Int[torch.Tensor, "batch pos"], np.ndarray]:
    """Sample rows with the repetition/reliability process above, vectorised over the batch.
    (Over 60 lines: the docstring, and one loop over positions kept whole so that the order of
    the draws, which fixes every seeded row, reads in one place.)

    Each row depends only on its own uniforms (from :func:`uniforms`), so rows of several
    batches can be generated in one call. Fresh and repeated tokens are drawn from the base row
    restricted to their candidates by rejection (unrestricted O(1) draws until one is a
    candidate, at most ``REJECTION_ROUNDS``, then an exact restricted draw): exact draws from the
    restricted distribution.

    Args:
        base: the base process; it must give zero weight to tokens that may not appear.
        start: weights of the first token.
        u_choice, u_draw: the uniforms, ``[batch, pos]`` and ``[batch, pos, REJECTION_ROUNDS + 1]``.

    Returns:
        the tokens, and per row the second half's counts ``[batch, 3]``: repeated tokens,
        positions right after a repeated token, and those among them that continued with B.
    """
    b, c = u_choice.shape
    v = base.vocab_size
    pb = reliability
    q = repetition / (1 + reliability)
    rows = np.arange(b)
    tokens = np.zeros((b, c), dtype=np.int64)
    used = np.zeros((b, v), dtype=bool)
    first = np.zeros((b, c), dtype=bool)  # the position holds its token's first occurrence
    successor = np.zeros((b, v), dtype=np.int64)  # what followed A's most recent occurrence
    tally = np.zeros((b, 3), dtype=np.int64)
    prev_repeat = np.zeros(b, dtype=bool)
    x = inverse_cdf(np.broadcast_to(start.double().numpy(), (b, v)), u_draw[:, 0, -1])
    prev2 = prev = np.zeros(b, dtype=np.int64)
    for i in range(c):
        if i > 0:
            u = u_choice[:, i] if i >= c // 2 else np.full(b, 2.0)  # first half: fresh only
            copy = prev_repeat & (u < pb)
            repeat = ~copy & (u < np.where(prev_repeat, pb + (1 - pb) * q, q))
            b_tok = successor[rows, prev]
            x = b_tok.copy()
            fresh = np.flatnonzero(~copy & ~repeat)
            if fresh.size:
                x[fresh] = _fresh(base, fresh, prev, prev2, u_draw[:, i], used)
            rep = np.flatnonzero(repeat)
            if rep.size:
                excluded = np.where(prev_repeat[rep], b_tok[rep], -1)  # B, when A repeated
                x[rep] = _repeat(
                    base, rep, excluded, prev, prev2, u_draw[:, i], used, tokens, first, i
                )
            successor[rows, prev] = x
            if i - 1 >= c // 2:  # B position after a repeated A in the second half
                tally[:, 1] += prev_repeat
                tally[:, 2] += prev_repeat & (x == b_tok)
        prev_repeat = used[rows, x]
        if i >= c // 2:
            tally[:, 0] += prev_repeat
        used[rows, x] = True
        first[:, i] = ~prev_repeat
        tokens[:, i] = x
        prev2, prev = prev, x
    return torch.from_numpy(tokens), tally


def _restricted(base: BaseProcess, rows, prev, prev2, u, allowed, exact) -> np.ndarray:
    """One token for each row in ``rows`` from its base row restricted to ``allowed(rows,
    tokens)``: unrestricted draws until one is allowed (at most ``REJECTION_ROUNDS``), then
    ``exact(rows, u)`` for the rows still open. Either way an exact restricted draw."""
    out, todo = np.zeros(len(rows), dtype=np.int64), np.arange(len(rows))
    for k in range(REJECTION_ROUNDS):
        r = rows[todo]
        cand = base.draw(prev[r], prev2[r], u[r, k : k + 1])[:, 0]
        ok = allowed(todo, cand)
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
        if not todo.size:
            return out
    out[todo] = exact(todo, u[rows[todo], -1])
    return out


def _fresh(base: BaseProcess, rows, prev, prev2, u, used) -> np.ndarray:
    """An unused token for each row in ``rows``."""
    v = used.shape[1]

    def exact(todo, u_last):
        r = rows[todo]
        everything = np.broadcast_to(np.arange(v), (len(r), v))
        return inverse_cdf(base.weights(prev[r], prev2[r], everything) * ~used[r], u_last)

    return _restricted(
        base, rows, prev, prev2, u, lambda todo, cand: ~used[rows[todo], cand], exact
    )


def _repeat(base: BaseProcess, rows, excluded, prev, prev2, u, used, tokens, first, i):
    """An earlier token of the row, other than ``excluded`` (A's successor B, or -1), for each
    row in ``rows``; the exact fallback weighs the row's first occurrences so far."""

    def allowed(todo, cand):
        return used[rows[todo], cand] & (cand != excluded[todo])

    def exact(todo, u_last):
        r = rows[todo]
        earlier = tokens[r, :i]
        keep = first[r, :i] & (earlier != excluded[todo][:, None])
        w = base.weights(prev[r], prev2[r], earlier) * keep
        return earlier[np.arange(len(r)), inverse_cdf(w, u_last)]

    return _restricted(base, rows, prev, prev2, u, allowed, exact)


class RepetitionLayer:
    """Batches of the repetition/reliability process over a base process, for a producer.

    Rows of consecutive steps are generated together (:class:`~ihprobe.data.blocks.StepBlocks`);
    each batch reports its realised second-half repetition and reliability.
    """

    def __init__(
        self,
        producer: Producer,
        base: BaseProcess,
        start: torch.Tensor,
        repetition: float,
        reliability: float,
    ):
        self.producer = producer
        self.blocks = StepBlocks(
            producer,
            lambda g: uniforms(g, producer.batch_size, producer.context),
            lambda u_choice, u_draw: generate(
                base,
                start,
                repetition=repetition,
                reliability=reliability,
                u_choice=u_choice,
                u_draw=u_draw,
            ),
        )

    def sample(self, step: int) -> Batch:
        p = self.producer
        tokens, tally = self.blocks.rows(step)
        repeats, followers, hits = tally.sum(0).tolist()
        info = {"repetition": repeats / ((p.context - p.context // 2) * p.batch_size)}
        if followers:  # undefined without repeats: left out so logs stay strict JSON
            info["reliability"] = hits / followers
        return Batch(tokens=tokens, info=info)
