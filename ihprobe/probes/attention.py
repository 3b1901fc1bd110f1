"""Attention-pattern head scores as (query, key) position pairs.

Every attention score here is the mean, over rows and over a fixed list of (query, key) pairs,
of ``A[l,h][b, query, key]``. The pairs depend only on the probe's layout (``n``, snippet
length, BOS), not on the row, so one gather on ``blocks.{l}.attn.hook_pattern`` inside the hook
(:func:`ihprobe.core.hooks.pattern_pairs`) keeps ``[batch, head, pair]`` and drops the rest.

On repeated tokens ``[s_1..s_n, s_1..s_n]`` (positions shifted by one with BOS), with
second-half queries ``q``:

============== ============ =================================================================
score          key          meaning
============== ============ =================================================================
prefix_match   ``q - n + 1`` the token after the earlier occurrence of the current token
previous_token ``q - 1``    the previous token
duplicate      ``q - n``    the earlier occurrence of the current token
============== ============ =================================================================

Snippets of one length ``L`` ([B]'s protocol): ``forward_induction_fixed`` on ``[S, SEP, S]``
pairs the k-th token of the copy (position ``L + 1 + k``) with key ``k + 1`` (query - L),
k = 0..L-2; [B]'s ``anti_induction`` on ``[S, SEP, reverse(S)]`` pairs the copy's token ``s_k``
(position ``2L - k``) with key ``k - 1``, just before the first occurrence of ``s_k``,
k = 1..L-1 (an anti-diagonal). Snippets whose ``L`` varies per row (:data:`VARIED_PAIRS`) have
pairs per row: ``forward_induction_varied`` as above in each row's own ``L``;
``backward_duplicate`` pairs the reversed copy's ``s_k`` with its earlier occurrence at ``k``,
``backward_previous_token`` pairs ``s_k`` in ``S`` with ``k - 1``: the two attention steps of a
backward-copying circuit.

Correspondence with TransformerLens ``head_detector.detect_head(model, seq, name,
error_measure="mul")`` on the same repeated tokens: its score per prompt is ``sum(A * D) /
sum(A)``, where ``D`` is the detection pattern and ``sum(A)`` is the number of query rows
``T`` (every row of a softmax sums to 1; ``exclude_bos=True`` subtracts the attention to
position 0 instead). For ``"induction_head"`` and ``"duplicate_token_head"``, ``D`` marks
exactly the ``n`` pairs above (``T = 2n``, or ``2n + 1`` when ``to_tokens`` prepends BOS, which
it does by default), so ``detect_head = prefix_matching * n / T`` -- half of ihprobe's score
without BOS -- averaged over prompts. Its ``"previous_token_head"`` averages over all ``T - 1``
queries, not only the second half.

>>> pairs = repeated_pairs(n=3)
>>> pairs["prefix_matching"]
(tensor([3, 4, 5]), tensor([1, 2, 3]))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int

from ihprobe.probes.inputs import VARIED_LENGTHS
from ihprobe.probes.recall import query_positions

Pairs = tuple[Int[torch.Tensor, " pair"], Int[torch.Tensor, " pair"]]

REPEATED_SCORES = ("prefix_matching", "previous_token", "duplicate_token")
# varied-|S| head scores (:func:`varied_pairs`): the rows they read, the first k, and pair
# j's (query, key) in a row of |S| = L, with k = j + first and j = 0 .. L - 2
VARIED_PAIRS: dict[str, tuple[str, int, Callable]] = {
    "forward_induction_varied": ("forward", 0, lambda k, L: (L + 1 + k, k + 1)),
    "backward_duplicate": ("backward", 1, lambda k, L: (2 * L - k, k)),
    "backward_previous_token": ("backward", 1, lambda k, L: (k, k - 1)),
}


def repeated_pairs(n: int, bos: bool = False) -> dict[str, Pairs]:
    """(queries, keys) of the repeated-token scores, one pair per second-half query.

    >>> repeated_pairs(2, bos=True)["duplicate_token"]
    (tensor([3, 4]), tensor([1, 2]))
    """
    q = query_positions(n, bos)
    return {
        "prefix_matching": (q, q - n + 1),
        "previous_token": (q, q - 1),
        "duplicate_token": (q, q - n),
    }


def forward_pairs(length: int, bos: bool = False) -> Pairs:
    """(queries, keys) of forward induction on ``[S, SEP, S]`` with ``|S| = length``.

    >>> forward_pairs(3)
    (tensor([4, 5]), tensor([1, 2]))
    """
    k = torch.arange(length - 1, device="cpu")
    return k + length + 1 + int(bos), k + 1 + int(bos)


def backward_pairs(length: int, bos: bool = False) -> Pairs:
    """(queries, keys) of anti-induction on ``[S, SEP, reverse(S)]`` with ``|S| = length``.

    The copy holds ``s_k`` at position ``2 * length - k``; the correct next token
    ``s_{k-1}`` sits at key ``k - 1``.

    >>> backward_pairs(3)       # s_2 at 4 -> s_1 at 1; s_1 at 5 -> s_0 at 0
    (tensor([4, 5]), tensor([1, 0]))
    """
    k = torch.arange(length - 1, 0, -1, device="cpu")
    return 2 * length - k + int(bos), k - 1 + int(bos)


def varied_pairs(
    score: str, lengths: Int[torch.Tensor, " rows"], bos: bool = False
) -> tuple[
    Int[torch.Tensor, "rows pair"], Int[torch.Tensor, "rows pair"], Bool[torch.Tensor, "rows pair"]
]:
    """(queries, keys, valid) of a varied-length score: ``L - 1`` real pairs in a row of
    ``|S| = L``, then padding (position 0, not valid) up to the longest row's.

    >>> q, k, valid = varied_pairs("backward_duplicate", torch.tensor([3, 2]))
    >>> q.tolist(), k.tolist(), valid.tolist()
    ([[5, 4], [3, 0]], [[1, 2], [1, 0]], [[True, True], [True, False]])
    """
    _, first, pair = VARIED_PAIRS[score]
    return row_positions(lambda j, L: pair(j + first, L), lengths, bos)


def row_positions(
    position: Callable, lengths: Int[torch.Tensor, " rows"], bos: bool = False
) -> tuple[torch.Tensor, ...]:
    """``position(j, L)`` (one tensor, or a tuple of them) for ``j = 0 .. max(L) - 2`` in each
    row, shifted by one with BOS; padding past a row's ``L - 1`` is position 0; and the mask of
    the real ones, last.

    >>> [t.tolist() for t in row_positions(lambda j, L: L + 1 + j, torch.tensor([2, 3]))]
    [[[3, 0], [4, 5]], [[True, False], [True, True]]]
    """
    j = torch.arange(int(lengths.max()) - 1, device=lengths.device)[None]
    length = lengths[:, None]
    valid = j < length - 1
    found = position(j, length)
    found = found if isinstance(found, tuple) else (found,)
    return *(torch.where(valid, p + int(bos), 0) for p in found), valid


def uniform_chance(
    queries: Int[torch.Tensor, "*rows pair"], valid: Bool[torch.Tensor, "*rows pair"] | None = None
) -> float:
    """The score of a head that spreads attention uniformly over the causal prefix: the mean
    of ``1 / (q + 1)`` over the (valid) pairs.

    >>> round(uniform_chance(forward_pairs(20)[0]), 4)
    0.0333
    """
    values = 1.0 / (queries.double() + 1)
    return float(values.mean() if valid is None else values[valid].mean())


def varied_chance(score: str, lengths: tuple[int, int]) -> float:
    """The expected uniform-head score of a varied-length score, each length equally likely:
    like the score, pooled over the pairs of every length (longer rows hold more pairs).

    >>> round(varied_chance("forward_induction_varied", (10, 30)), 4)
    0.033
    """
    queries, _, valid = varied_pairs(score, torch.arange(lengths[0], lengths[1] + 1, device="cpu"))
    return uniform_chance(queries, valid)


def snippet_chance(score: str) -> Callable[[int, int], float]:
    """``chance(vocab, n)`` of a snippet score for the metric table: a uniform head's score on
    snippets of ``|S| = n`` (fixed length), or on the default varied lengths.

    >>> round(snippet_chance("anti_induction")(300, 20), 4)
    0.0333
    """
    if score in VARIED_PAIRS:
        return lambda vocab, n: varied_chance(score, VARIED_LENGTHS)
    pairs = {"forward_induction_fixed": forward_pairs, "anti_induction": backward_pairs}[score]
    return lambda vocab, n: uniform_chance(pairs(n)[0])


def concat_pairs(
    named: dict[str, tuple[Int[torch.Tensor, " _"], Int[torch.Tensor, " _"]]],
) -> tuple[Pairs, dict[str, slice]]:
    """All pairs in one list (for one gather in one hook) and each score's slice of it; each
    score has its own number of pairs.

    >>> (q, k), where = concat_pairs({"a": (torch.tensor([2]), torch.tensor([1])),
    ...                               "b": (torch.tensor([3, 4]), torch.tensor([0, 0]))})
    >>> q.tolist(), where["b"]
    ([2, 3, 4], slice(1, 3, None))
    """
    where, start = {}, 0
    for name, (q, _) in named.items():
        where[name] = slice(start, start + len(q))
        start += len(q)
    queries = torch.cat([q for q, _ in named.values()])
    keys = torch.cat([k for _, k in named.values()])
    return (queries, keys), where


def pair_mean(
    attention: Float[torch.Tensor, "layer batch head pair"],
) -> Float[torch.Tensor, "layer head"]:
    """Mean over rows and pairs: the head score."""
    return attention.mean(dim=(1, 3))


def pair_sd(
    attention: Float[torch.Tensor, "layer batch head pair"],
) -> Float[torch.Tensor, "layer head"]:
    """Population standard deviation over rows and pairs (numpy's ``std``, as [A]'s code)."""
    per_head = rearrange(attention, "layer batch head pair -> layer head (batch pair)")
    return per_head.std(dim=2, correction=0)
