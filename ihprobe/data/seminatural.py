"""Semi-natural data ([A] experiment 2): a bigram model of real text with two knobs.

Rows of length C are sampled from a smoothed, row-normalised token-to-token transition matrix
estimated from a natural token stream. The first half of a row never re-uses a token. In the
second half, with p_a (repetition) and p_b (reliability), q = p_a / (1 + p_b):

- after a repeated token A: with p_b copy B, the token that followed A's most recent earlier
  occurrence; else with q repeat an earlier token other than B; else emit a fresh token;
- after a fresh token: with q repeat an earlier token, else a fresh one.

Every draw uses the base transition row restricted to its candidates. The realised repetition of
the second half is p_a / (1 - p_b**2 + p_a p_b) in steady state (p_a only when p_a = p_b); the
realised reliability is p_b. Both are measured on every batch and reported in ``Batch.info``.

>>> p = SemiNaturalProducer(batch_size=64, context=64, repetition=0.9, reliability=0.9,
...                         vocab_size=300)
>>> round(p.sample(0).info["reliability"], 1)
0.9
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from jaxtyping import Float, Int

from ihprobe.data.base import Batch, Producer
from ihprobe.data.blocks import StepBlocks
from ihprobe.data.iid import check_probability
from ihprobe.data.text import load_corpus
from ihprobe.errors import IhprobeError

MAX_VOCAB = 8192  # the bigram matrix is dense: 8192^2 float32 = 256 MB
REJECTION_ROUNDS = 3  # unrestricted draws tried per fresh token before an exact restricted one


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


def bigram_matrix(
    stream: Int[torch.Tensor, "n"], vocab_size: int, smoothing: float = 0.1
) -> Float[torch.Tensor, "vocab vocab"]:  # noqa: F821 - jaxtyping dims
    """Row-normalised bigram counts of a token stream, each count plus ``smoothing``."""
    s = stream.long()
    counts = torch.bincount(s[:-1] * vocab_size + s[1:], minlength=vocab_size**2).double()
    counts = counts.view(vocab_size, vocab_size) + smoothing
    return (counts / counts.sum(1, keepdim=True)).float()


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

    Each row depends only on its own uniforms (from :func:`uniforms`), so rows of several
    batches can be generated in one call. Fresh tokens are drawn from the base row by rejection
    (unrestricted draws until one is unused, at most ``REJECTION_ROUNDS``, then an exact restricted
    draw), repeats from the base row restricted to the row's earlier tokens: both are exact draws
    from the restricted distribution.

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
                earlier = tokens[rep, :i]
                not_b = earlier != np.where(prev_repeat[rep], b_tok[rep], -1)[:, None]
                w = base.weights(prev[rep], prev2[rep], earlier) * (first[rep, :i] & not_b)
                x[rep] = earlier[np.arange(rep.size), inverse_cdf(w, u_draw[rep, i, -1])]
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


def _fresh(base: BaseProcess, todo, prev, prev2, u, used) -> np.ndarray:
    """One unused token for each row in ``todo``, from its base row restricted to unused tokens."""
    rows, out = todo, np.zeros(len(used), dtype=np.int64)
    for k in range(REJECTION_ROUNDS):  # most rows accept their first draw
        cand = base.draw(prev[todo], prev2[todo], u[todo, k : k + 1])[:, 0]
        ok = ~used[todo, cand]
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
        if not todo.size:
            return out[rows]
    everything = np.broadcast_to(np.arange(used.shape[1]), (todo.size, used.shape[1]))
    w = base.weights(prev[todo], prev2[todo], everything) * ~used[todo]
    out[todo] = inverse_cdf(w, u[todo, -1])  # an exact draw from the restricted row
    return out[rows]


def inverse_cdf(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Per row, the index drawn with probability proportional to ``weights`` (u in (0, 1))."""
    cdf = np.cumsum(weights, axis=1)
    return np.minimum((cdf < u[:, None] * cdf[:, -1:]).sum(1), weights.shape[1] - 1)


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


class SemiNaturalProducer(Producer):
    """Semi-natural rows over a bigram model of a natural corpus (default: the embedded one).

    Args:
        repetition: p_a, P(A,B..A).
        reliability: p_b, P(B | A,B..A).
        smoothing: added to every bigram count before row normalisation.
        text, dataset, tokenizer, vocab_size, docstrings, ...: the corpus the bigrams are
            estimated from, as for the natural producer.
    """

    name = "semi-natural"
    measure_from = 0.5  # repetition/reliability are measured on the second half of each row

    def __init__(
        self,
        *,
        batch_size: int,
        context: int,
        seed: int = 0,
        total_steps: int = 1,
        repetition: float = 0.9,
        reliability: float = 0.9,
        smoothing: float = 0.1,
        text: str | list[str] | None = None,
        dataset: str | None = None,
        dataset_config: str | None = None,
        dataset_split: str = "train",
        text_column: str = "text",
        tokenizer: str | None = None,
        vocab_size: int = 512,
        docstrings: bool = False,
    ):
        super().__init__(batch_size=batch_size, context=context, seed=seed, total_steps=total_steps)
        self.repetition = check_probability("repetition", repetition)
        self.reliability = check_probability("reliability", reliability)
        if smoothing <= 0:
            raise IhprobeError(f"smoothing={smoothing} must be > 0 so every row has mass.")
        self.smoothing = float(smoothing)
        self.corpus_options = {
            "text": text,
            "dataset": dataset,
            "dataset_config": dataset_config,
            "dataset_split": dataset_split,
            "text_column": text_column,
            "tokenizer": tokenizer,
            "vocab_size": vocab_size,
            "docstrings": docstrings,
        }
        self.corpus = load_corpus(**self.corpus_options)
        if self.corpus.vocab_size > MAX_VOCAB:
            raise IhprobeError(
                f"the tokenizer has {self.corpus.vocab_size} ids; the dense bigram matrix of "
                f"semi-natural data supports at most {MAX_VOCAB}: use a local BPE (vocab_size)."
            )
        self.vocab_size = self.corpus.vocab_size
        self.special = {"eos": self.corpus.eos, "sep": self.corpus.sep}
        stream = torch.from_numpy(self.corpus.tokens.astype("int64"))
        banned = list(self.special.values())  # never emitted: EOS, SEP
        check_room(self.vocab_size - len(banned), context)
        self.transition = bigram_matrix(stream, self.vocab_size, self.smoothing)
        self.transition[:, banned] = 0.0
        self.unigram = torch.bincount(stream, minlength=self.vocab_size).float() + self.smoothing
        self.unigram[banned] = 0.0
        self.layer = RepetitionLayer(
            self, BigramProcess(self.transition), self.unigram, self.repetition, self.reliability
        )

    def sample(self, step: int) -> Batch:
        return self.layer.sample(step)

    def config(self) -> dict:
        return {
            **self.base_config(),
            "repetition": self.repetition,
            "reliability": self.reliability,
            "smoothing": self.smoothing,
            **self.corpus_options,
        }

    def tokenizer(self):
        return self.corpus.tokenizer
