"""Probe inputs: repeated random tokens and forward/backward snippets, seeded and vectorised.

Every function draws through its own ``torch.Generator`` seeded by ``seed``, so the same call
gives the same tokens on any machine. Token ids the model's tokenizer marks as special (BOS,
EOS, PAD, SEP, ...) are never drawn as content, and neither are ids beyond the tokenizer's
vocabulary (padded embedding rows that were never trained).

>>> tokens = repeated_tokens(model, n=50, batch=100, seed=0)      # doctest: +SKIP
>>> bool((tokens[:, :50] == tokens[:, 50:]).all())                 # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import Literal

import torch
from jaxtyping import Int

from ihprobe.core import calls
from ihprobe.core.errors import IhprobeError

SNIPPET_LENGTH = 20  # |S| of the Bi-Induct snippets [S, SEP, S] (as in Bi-Induct)
VARIED_LENGTHS = (10, 30)  # |S| drawn per row in this range: no single offset fits every row
SEP_TOKEN = "<|sep|>"  # the separator ihprobe's tokenizers reserve for snippets


def default_n(n_ctx: int) -> int:
    """[A]'s half-length of the repeated sequence: ``min(50, n_ctx // 2)``."""
    return min(50, n_ctx // 2)


def content_ids(model) -> Int[torch.Tensor, " ids"]:
    """Token ids that may be drawn as probe content: the vocabulary minus special tokens.

    >>> content_ids(model)[:3]                                         # doctest: +SKIP
    tensor([2, 3, 4])
    """
    vocab = model.cfg.d_vocab
    tok = getattr(model, "tokenizer", None)
    keep = torch.ones(vocab, dtype=torch.bool, device="cpu")
    if tok is not None:
        if 1 < len(tok) < vocab:  # embedding rows padded past the tokenizer: never trained
            keep[len(tok) :] = False
        special = [i for i in tok.all_special_ids if i is not None and 0 <= i < vocab]
        keep[special] = False
    return keep.nonzero().squeeze(1)


def bos_id(model) -> int:
    """The id prepended when ``bos=True``: the tokenizer's BOS token."""
    tok = getattr(model, "tokenizer", None)
    found = None if tok is None else tok.bos_token_id
    if found is None or not 0 <= found < model.cfg.d_vocab:
        raise IhprobeError(
            "bos=True needs a tokenizer with a BOS token inside the model's vocabulary; this "
            "model has none. Use bos=False, or load it with tokenizer=... that defines one."
        )
    return int(found)


def distinct_ids(
    candidates: Int[torch.Tensor, " ids"], batch: int, n: int, generator: torch.Generator
) -> Int[torch.Tensor, "batch n"]:
    """``batch`` rows of ``n`` distinct ids drawn uniformly from ``candidates`` (no loop).

    A random permutation cut to ``n`` per row: the ``n`` largest of i.i.d. uniform keys.
    """
    if n > len(candidates):
        raise IhprobeError(
            f"cannot draw {n} distinct tokens: the vocabulary has only {len(candidates)} usable "
            f"(non-special) ids. Pass n <= {len(candidates)}."
        )
    keys = torch.rand(batch, len(candidates), generator=generator, device="cpu")
    return candidates[keys.topk(n, dim=1).indices]


def _check_fits(n: int, extra: int, n_ctx: int, what: str) -> None:
    """Raise when a probe of length ``2n + extra`` does not fit the context."""
    if n < 1:
        raise IhprobeError(f"{what} must be at least 1 (got {n}).")
    if 2 * n + extra > n_ctx:
        largest = (n_ctx - extra) // 2
        raise IhprobeError(
            f"{what}={n} needs {2 * n + extra} positions but the model's context is {n_ctx}; "
            f"the largest {what} that fits is {largest}."
        )


def repeated_tokens(
    model, *, n: int | None = None, batch: int = 100, seed: int = 0, bos: bool = False
) -> Int[torch.Tensor, "batch pos"]:
    """[A]'s probe: per row ``n`` distinct random ids ``s``, repeated: ``[s_1..s_n, s_1..s_n]``.

    Args:
        model: a model from ``ihprobe.load`` (only its ``cfg.d_vocab``, ``cfg.n_ctx``,
            ``cfg.device`` and the tokenizer's special ids are read).
        n: half-length; defaults to ``min(50, n_ctx // 2)`` (less one when ``bos``).
        batch: rows.
        seed: seeds the generator; same seed, same tokens.
        bos: prepend the tokenizer's BOS, so every position shifts by one.

    Returns:
        int64 tensor ``[batch, 2n]`` (``[batch, 2n + 1]`` with ``bos``) on the model's device.

    Raises:
        IhprobeError: ``2n`` does not fit ``n_ctx`` (the message gives the largest n that fits),
            or fewer than ``n`` usable ids.

    Example:
        >>> x = repeated_tokens(model, n=8, batch=2, seed=1)           # doctest: +SKIP
        >>> x.shape, bool((x[:, :8] == x[:, 8:]).all())                # doctest: +SKIP
        (torch.Size([2, 16]), True)
    """
    calls.arguments(n=n, batch=batch, seed=seed, bos=bos)
    extra = int(bos)
    if n is None:
        n = default_n(model.cfg.n_ctx - extra)
    _check_fits(n, extra, model.cfg.n_ctx, "n")
    g = torch.Generator().manual_seed(seed)
    s = distinct_ids(content_ids(model), batch, n, g)
    tokens = torch.cat([s, s], dim=1)
    if bos:
        tokens = torch.cat([torch.full((batch, 1), bos_id(model), device="cpu"), tokens], dim=1)
    return tokens.to(model.cfg.device)


def sep_id(model) -> int | None:
    """The tokenizer's snippet separator (``<|sep|>`` or its sep token), or None."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return None
    found = tok.convert_tokens_to_ids(SEP_TOKEN) if SEP_TOKEN in tok.get_vocab() else None
    found = found if found is not None else tok.sep_token_id
    return int(found) if found is not None and 0 <= found < model.cfg.d_vocab else None


def snippets(
    model,
    *,
    backward: bool = False,
    length: int = SNIPPET_LENGTH,
    batch: int = 100,
    seed: int = 0,
    bos: bool = False,
    sep: int | None = None,
) -> Int[torch.Tensor, "batch pos"]:
    """Bi-Induct snippets: ``[S, SEP, S]`` (forward) or ``[S, SEP, reverse(S)]`` (backward).

    ``S`` holds ``length`` distinct random content ids per row. ``SEP`` is ``sep`` when given,
    else the tokenizer's separator (ihprobe's ``<|sep|>``), else one more random id per row
    that does not occur in ``S``.

    Example:
        >>> x = snippets(model, backward=True, length=4, batch=1)      # doctest: +SKIP
        >>> x[0, :4].flip(0).equal(x[0, 5:])                           # doctest: +SKIP
        True
    """
    extra = 1 + int(bos)
    _check_fits(length, extra, model.cfg.n_ctx, "length")
    sep = sep_id(model) if sep is None else sep
    g = torch.Generator().manual_seed(seed)
    candidates = content_ids(model)
    if sep is not None:
        candidates = candidates[candidates != sep]
    drawn = distinct_ids(candidates, batch, length + (sep is None), g)
    s = drawn[:, :length]
    middle = drawn[:, length:] if sep is None else torch.full((batch, 1), sep, device="cpu")
    parts = [s, middle, s.flip(1) if backward else s]
    if bos:
        parts.insert(0, torch.full((batch, 1), bos_id(model), device="cpu"))
    return torch.cat(parts, dim=1).to(model.cfg.device)


def varied_snippets(
    model,
    *,
    copy: Literal["forward", "backward", "shuffled"] = "forward",
    lengths: tuple[int, int] = VARIED_LENGTHS,
    batch: int = 100,
    seed: int = 0,
    bos: bool = False,
    sep: int | None = None,
) -> tuple[Int[torch.Tensor, "batch pos"], Int[torch.Tensor, " batch"]]:
    """Snippets whose ``|S|`` is drawn per row, uniformly in ``lengths`` (inclusive), so no one
    offset fits every row: ``[S, SEP, copy]``, then padding (the row's SEP) to the longest row.
    (Over 60 lines: most of it is this docstring.)

    ``copy`` is ``S`` (forward), ``reverse(S)`` (backward) or a random permutation of ``S``
    (shuffled, the control). The same ``seed`` draws the same ``S`` and lengths whatever
    ``copy`` is, so forward, backward and shuffled rows are paired. SEP is chosen as in
    :func:`snippets`. Padding comes after every scored position, so in a causal model it
    changes no score.

    Returns:
        tokens ``[batch, 2 * max(lengths) + 1]`` (one more with ``bos``) and each row's ``|S|``.

    Example:
        >>> x, n = varied_snippets(model, copy="backward", lengths=(3, 5))  # doctest: +SKIP
        >>> x[0, : n[0]].flip(0).equal(x[0, n[0] + 1 : 2 * n[0] + 1])      # doctest: +SKIP
        True
    """
    pair = isinstance(lengths, tuple | list) and len(lengths) == 2
    if not pair or not all(isinstance(v, int) and not isinstance(v, bool) for v in lengths):
        raise IhprobeError(
            f"snippet lengths must be two integers (shortest, longest), e.g. (10, 30); got "
            f"{lengths!r}."
        )
    low, high = lengths
    if not 2 <= low <= high:
        raise IhprobeError(
            f"snippet lengths {low}-{high}: pass two lengths 2 <= low <= high (each row's |S| "
            "is drawn between them, and a score needs at least one pair per row)."
        )
    extra = 1 + int(bos)
    if 2 * high + extra > model.cfg.n_ctx:
        raise IhprobeError(
            f"snippet lengths up to {high} need {2 * high + extra} positions but the model's "
            f"context is {model.cfg.n_ctx}; pass lengths up to {(model.cfg.n_ctx - extra) // 2}."
        )
    sep = sep_id(model) if sep is None else sep
    g = torch.Generator().manual_seed(seed)
    candidates = content_ids(model)
    if sep is not None:
        candidates = candidates[candidates != sep]
    drawn = distinct_ids(candidates, batch, high + 1, g)
    length = torch.randint(low, high + 1, (batch,), generator=g, device="cpu")
    order = torch.rand(batch, high, generator=g, device="cpu").masked_fill(
        torch.arange(high, device="cpu") >= length[:, None], 2.0
    )  # a random permutation of each row's first |S| indices, the rest last
    seps = drawn[:, high] if sep is None else torch.full((batch,), sep, device="cpu")
    j = torch.arange(2 * high + 1, device="cpu")[None]
    n = length[:, None]
    c = (j - n - 1).clamp(min=0, max=high - 1)  # index into the copy
    source = {
        "forward": c,
        "backward": (n - 1 - c).clamp(min=0),
        "shuffled": order.argsort(dim=1).gather(1, c),
    }[copy]
    index = torch.where(j < n, j.clamp(max=high - 1), source)
    tokens = drawn.gather(1, index)
    tokens = torch.where((j == n) | (j > 2 * n), seps[:, None], tokens)
    if bos:
        tokens = torch.cat([torch.full((batch, 1), bos_id(model), device="cpu"), tokens], dim=1)
    return tokens.to(model.cfg.device), length.to(model.cfg.device)
