"""Corpus statistics: where a token stream sits on [A]'s repetition x reliability frontier.

Within windows of the context length (rows of a batch, or consecutive chunks of a 1-D stream):

- **repetition** P(A,B..A): share of positions whose token occurred earlier in the window;
- **reliability** P(B | A,B..A): among positions right after a repeated token A, the share that
  continue with B, the successor of A's most recent earlier occurrence;
- **bigram_entropy** H(w_i | w_{i-1}) and **unigram_entropy** H(w), in bits, from counts;
- **zipf_exponent** s of a least-squares fit log p(rank) = c - s log rank (ranks with count > 0).

>>> x = torch.tensor([[5, 6, 7, 5, 6, 7, 5, 9]])
>>> r = corpus_stats(x, context=8)
>>> r["repetition"], r["reliability"]
(0.5, 0.75)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Bool, Int

from ihprobe.core.errors import IhprobeError


def windows(tokens: torch.Tensor | np.ndarray, context: int) -> Int[torch.Tensor, "batch pos"]:
    """``tokens`` as rows of ``context`` tokens: a 2-D batch is cut, a 1-D stream chunked."""
    t = torch.as_tensor(
        np.asarray(tokens, dtype=np.int64) if isinstance(tokens, np.ndarray) else tokens
    )
    t = t.long()
    if t.dim() == 1:
        n = (t.numel() // context) * context
        if n == 0:
            raise IhprobeError(
                f"the stream has {t.numel()} tokens, fewer than one context of {context}."
            )
        return t[:n].view(-1, context)
    if t.dim() != 2:
        raise IhprobeError(
            f"expected a 1-D stream or a 2-D batch of tokens, got shape {tuple(t.shape)}."
        )
    return t[:, :context]


def repeat_structure(
    rows: Int[torch.Tensor, "batch pos"],
) -> tuple[Bool[torch.Tensor, "batch pos"], Int[torch.Tensor, "batch pos"]]:
    """For every position: does its token occur earlier in the row, and what followed the most
    recent earlier occurrence (-1 when there is none)."""
    n, c = rows.shape
    # sort each row by (token, position): an occurrence's predecessor in that order is the most
    # recent earlier occurrence of the same token, if the token matches
    order = (rows * c + torch.arange(c)).argsort(dim=1)
    sorted_tokens = rows.gather(1, order)
    same = sorted_tokens[:, 1:] == sorted_tokens[:, :-1]
    last_sorted = torch.full_like(order, -1)
    last_sorted[:, 1:] = torch.where(same, order[:, :-1], -1)
    last = torch.empty_like(order).scatter_(1, order, last_sorted)
    is_repeat = last >= 0
    succ_pos = (last + 1).clamp(max=c - 1)
    successor = torch.where(is_repeat, rows.gather(1, succ_pos), -1)
    return is_repeat, successor


def repetition_reliability(
    tokens: torch.Tensor | np.ndarray, context: int, *, start: int = 0
) -> tuple[float, float]:
    """Realised repetition and reliability within windows of ``context`` tokens.

    Args:
        start: count only positions ``>= start`` of each window (e.g. ``context // 2`` for the
            semi-natural producer, whose first half never repeats by construction).

    >>> rep, rel = repetition_reliability(torch.tensor([[1, 2, 1, 2, 1, 3]]), 6)
    >>> rep, round(rel, 3)        # 1, 2, 1 repeat; 2 and 1 follow as before, 3 does not
    (0.5, 0.667)
    """
    rows = windows(tokens, context)
    is_repeat, successor = repeat_structure(rows)
    rep = float(is_repeat[:, start:].float().mean())
    after = is_repeat[:, start:-1]  # A at i-1 was repeated; B at i
    hit = rows[:, start + 1 :] == successor[:, start:-1]
    n = int(after.sum())
    return rep, (int((hit & after).sum()) / n if n else float("nan"))


def entropies(tokens: torch.Tensor | np.ndarray, context: int) -> tuple[float, float]:
    """(bigram conditional entropy H(w_i | w_{i-1}), unigram entropy H(w)) in bits, in windows."""
    rows = windows(tokens, context)
    v = int(rows.max()) + 1
    pairs = (rows[:, :-1] * v + rows[:, 1:]).flatten()  # counted sparsely: v^2 may be huge
    h_joint = _entropy(torch.unique(pairs, return_counts=True)[1].double())
    h_prev = _entropy(torch.unique(rows[:, :-1], return_counts=True)[1].double())
    h_uni = _entropy(torch.unique(rows, return_counts=True)[1].double())
    return h_joint - h_prev, h_uni


def zipf_exponent(tokens: torch.Tensor | np.ndarray) -> float:
    """s of the least-squares line log p = c - s log rank over the tokens that occur."""
    t = torch.as_tensor(
        np.asarray(tokens, dtype=np.int64) if isinstance(tokens, np.ndarray) else tokens
    )
    counts = torch.bincount(t.flatten().long()).double()
    counts = counts[counts > 0].sort(descending=True).values
    if len(counts) < 2:
        return float("nan")
    x = torch.log(torch.arange(1, len(counts) + 1, dtype=torch.float64))
    y = torch.log(counts / counts.sum())
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    return float(-slope)


def corpus_stats(tokens: torch.Tensor | np.ndarray, context: int, *, start: int = 0) -> dict:
    """All statistics of a token stream or batch, as a JSON-ready dict.

    Args:
        tokens: ``LongTensor[N, C]`` batch rows or a 1-D stream (chunked into windows).
        context: window length (the training context).
        start: first position of each window counted for repetition/reliability.

    Returns:
        keys ``repetition, reliability, bigram_entropy, unigram_entropy, zipf_exponent, tokens,
        context``.

    Example:
        >>> stats = corpus_stats(torch.arange(8).repeat(2, 2), context=16)   # two rows, each [s, s]
        >>> stats["repetition"], stats["context"]
        (0.5, 16)
    """
    rep, rel = repetition_reliability(tokens, context, start=start)
    h2, h1 = entropies(tokens, context)
    return {
        "repetition": rep,
        "reliability": rel,
        "bigram_entropy": h2,
        "unigram_entropy": h1,
        "zipf_exponent": zipf_exponent(windows(tokens, context)),
        "tokens": int(windows(tokens, context).numel()),
        "context": int(context),
    }


def producer_stats(producer, batches: int = 16) -> dict:
    """:func:`corpus_stats` of ``batches`` consecutive batches of a producer, plus the mean of
    what its batches report (e.g. ``snippet_fraction``) and its name.

    A natural-text producer is measured on its whole token stream instead.

    >>> from ihprobe.data import make_producer
    >>> p = make_producer("iid", batch_size=8, context=32, vocab_size=16)
    >>> round(producer_stats(p, batches=2)["unigram_entropy"])
    4
    """
    corpus = getattr(producer, "corpus", None)
    if producer.name == "natural" and corpus is not None:
        result = corpus_stats(corpus.tokens, producer.context)
    else:
        samples = [producer.sample(step) for step in range(batches)]
        tokens = torch.cat([b.tokens for b in samples])
        start = int(producer.measure_from * producer.context)
        result = corpus_stats(tokens, producer.context, start=start)
        for key in sorted({k for b in samples for k in b.info}):
            values = [b.info[key] for b in samples if key in b.info]
            result[key] = float(np.nanmean(values)) if values else math.nan
    return {"producer": producer.name, **result}


def _entropy(counts: torch.Tensor) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * torch.log2(p)).sum()) if len(p) else math.nan
