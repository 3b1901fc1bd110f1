"""Model-level in-context scores from logits, one value per batch row.

Every function here is pure and row-wise: row ``b`` of the output depends only on row ``b`` of
the inputs. Callers that stack many conditions along the batch (the ablation code puts one head
mask per group of rows) average the rows of each group themselves; ``scan`` averages them all.

On repeated random tokens ``x = [s_1..s_n, s_1..s_n]`` (BOS-shifted by one when ``bos``), the
queries are the ``n`` second-half positions ``q`` and the correct next token is the one after the
earlier occurrence of the current token, ``y_q = x[q - n + 1]``, as in [A]'s code
(``inputs[:, 1:n+1]`` against ``logits[:, n:]``). For every query but the last this is also the
actual next token; for the last it is ``s_1``, where the repetition would continue.

>>> logits = model(tokens)                                            # doctest: +SKIP
>>> acc, rank = associative_recall_per_row(logits, tokens, n=50)      # doctest: +SKIP
>>> acc.mean(), rank.mean()                                           # doctest: +SKIP
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int

from ihprobe.core.errors import IhprobeError

ICL_EARLY, ICL_LATE = 50, 500  # Olsson et al.'s token positions for the ICL score
ICL_SHORT = (0.1, 0.8)  # fractions of n_ctx used when the context is too short for 500


def query_positions(n: int, bos: bool = False) -> Int[torch.Tensor, " query"]:
    """The second-half query positions ``q`` of a repeated sequence of half-length ``n``.

    >>> query_positions(3), query_positions(3, bos=True)
    (tensor([3, 4, 5]), tensor([4, 5, 6]))
    """
    return torch.arange(n, 2 * n, device="cpu") + int(bos)  # moved where they are read


def induction_targets(
    tokens: Int[torch.Tensor, "batch pos"], n: int, bos: bool = False
) -> Int[torch.Tensor, "batch query"]:
    """The correct next token ``y_q = x[q - n + 1]`` at each second-half query."""
    return tokens[:, query_positions(n, bos).to(tokens.device) - n + 1]


def target_ranks(
    logits: Float[torch.Tensor, "batch query vocab"], targets: Int[torch.Tensor, "batch query"]
) -> Int[torch.Tensor, "batch query"]:
    """Number of vocabulary logits strictly greater than the target's logit (0 = top-1)."""
    target = logits.gather(-1, targets.unsqueeze(-1))
    return (logits > target).sum(-1)


def next_token_ranks(
    logits: Float[torch.Tensor, "batch pos vocab"], tokens: Int[torch.Tensor, "batch pos"]
) -> Int[torch.Tensor, "batch pos_minus_1"]:
    """Rank of the actual next token at every position but the last.

    The rank at position ``p`` is the number of logits at ``p`` strictly greater than the logit
    of ``tokens[:, p + 1]``; ties count in the target's favour.

    Example:
        >>> logits = torch.tensor([[[0.0, 2.0, 1.0], [3.0, 1.0, 2.0]]])
        >>> next_token_ranks(logits, torch.tensor([[0, 2]]))  # logit 1.0 of id 2: one above
        tensor([[1]])
    """
    return target_ranks(logits[:, :-1], tokens[:, 1:])


def associative_recall_per_row(
    logits: Float[torch.Tensor, "batch pos vocab"],
    tokens: Int[torch.Tensor, "batch pos"],
    n: int,
    bos: bool = False,
) -> tuple[Float[torch.Tensor, " batch"], Float[torch.Tensor, " batch"]]:
    """[A]'s associative recall on repeated tokens: (accuracy, mean rank) per row.

    Over the ``n`` second-half queries, accuracy is the share whose correct next token has rank
    0, and mean rank is the mean of the ranks (:func:`target_ranks`). Chance accuracy is 1/V.

    Example:
        >>> acc, rank = associative_recall_per_row(model(x), x, n=50)  # doctest: +SKIP
    """
    q = query_positions(n, bos).to(logits.device)
    return query_recall(logits[:, q], induction_targets(tokens, n, bos))


def query_recall(
    query_logits: Float[torch.Tensor, "batch query vocab"],
    targets: Int[torch.Tensor, "batch query"],
) -> tuple[Float[torch.Tensor, " batch"], Float[torch.Tensor, " batch"]]:
    """(accuracy, mean rank) per row from the logits at the query positions only."""
    ranks = target_ranks(query_logits, targets)
    return (ranks == 0).float().mean(1), ranks.float().mean(1)


def induction_loss_per_row(
    logits: Float[torch.Tensor, "batch pos vocab"],
    tokens: Int[torch.Tensor, "batch pos"],
    n: int,
    bos: bool = False,
) -> Float[torch.Tensor, " batch"]:
    """Mean cross-entropy (nats) of the correct next token over the second-half queries.

    Example:
        >>> loss = induction_loss_per_row(model(x), x, n=50)           # doctest: +SKIP
    """
    q = query_positions(n, bos).to(logits.device)
    return query_loss(logits[:, q], induction_targets(tokens, n, bos))


def query_loss(
    query_logits: Float[torch.Tensor, "batch query vocab"],
    targets: Int[torch.Tensor, "batch query"],
) -> Float[torch.Tensor, " batch"]:
    """Mean cross-entropy per row from the logits at the query positions only."""
    logits = query_logits.float()
    target = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (logits.logsumexp(-1) - target).mean(1)


def token_losses(
    logits: Float[torch.Tensor, "batch pos vocab"], tokens: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, "batch pos_minus_1"]:
    """Cross-entropy of each token ``t >= 1`` given the tokens before it (column ``t - 1``).

    Example:
        >>> token_losses(torch.zeros(1, 3, 4), torch.tensor([[0, 1, 2]]))  # uniform over 4 ids
        tensor([[1.3863, 1.3863]])
    """
    logp = logits[:, :-1].float().log_softmax(-1)
    return -logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)


def icl_score_per_row(
    logits: Float[torch.Tensor, "batch pos vocab"],
    tokens: Int[torch.Tensor, "batch pos"],
    early: int,
    late: int,
) -> Float[torch.Tensor, " batch"]:
    """Olsson's in-context learning score: loss of token ``late`` minus loss of token ``early``.

    Token ``t`` is predicted from the logits at position ``t - 1``; negative scores mean the
    model predicts better later in the context. Needs ``1 <= early < late < pos``.

    Example:
        >>> early, late = icl_positions(model.cfg.n_ctx)              # doctest: +SKIP
        >>> icl_score_per_row(model(text_tokens), text_tokens, early, late)  # doctest: +SKIP
    """
    if not 1 <= early < late < tokens.shape[1]:
        raise IhprobeError(
            f"the ICL score compares tokens {early} and {late} but rows hold {tokens.shape[1]} "
            "tokens; pass longer text or positions with 1 <= early < late < length."
        )
    late_loss = token_losses(logits[:, late - 1 : late + 1], tokens[:, late - 1 : late + 1])
    early_loss = token_losses(logits[:, early - 1 : early + 1], tokens[:, early - 1 : early + 1])
    return late_loss[:, 0] - early_loss[:, 0]


def icl_positions(n_ctx: int) -> tuple[int, int]:
    """Token positions (early, late) of the ICL score for a context of ``n_ctx`` tokens.

    Olsson's 50 and 500 when the context holds token 500; otherwise 0.1 and 0.8 of ``n_ctx``
    (at least token 1, and early < late).

    >>> icl_positions(2048), icl_positions(64)
    ((50, 500), (6, 51))
    """
    if n_ctx > ICL_LATE:
        return ICL_EARLY, ICL_LATE
    early = max(1, int(ICL_SHORT[0] * n_ctx))
    late = max(early + 1, int(ICL_SHORT[1] * n_ctx))
    return early, late
