"""Clean and corrupted inputs for patching, and the metric read from their logits.

A :class:`PatchPair` holds clean rows, corrupted rows of the same shape, the positions whose
logits the metric reads, and the clean target token at each of them. Two corruptions of the
repeated random sequence ``[s_1..s_n, s_1..s_n]`` are built in:

=========== ====================================================== =========================
corruption  corrupted rows                                         metric reads
=========== ====================================================== =========================
second_half ``[s, s']``: the second half re-drawn (ids not in s)   every second-half query
anchors     ``s_i`` re-drawn in the first half for even ``i``      the queries holding those
=========== ====================================================== =========================

``second_half`` removes every earlier occurrence of the second half's tokens: it changes what
the induction head's *queries* look for. ``anchors`` keeps the second half and the answer
tokens ``s_{i+1}`` and changes only the token before each answer in the first half, which the
previous-token head copies forward: it changes what the induction head's *keys* offer, so it is
the input for path patching into keys.

The metric is the target's logit minus the mean logit at the position (a logit difference
against the average token; unchanged when every logit shifts by a constant), averaged over the
read positions of a row.

>>> pair = induction_pair(model, corruption="anchors", n=16, batch=8)      # doctest: +SKIP
>>> pair.clean.shape, pair.positions[:3]                                   # doctest: +SKIP
(torch.Size([8, 32]), tensor([16, 18, 20]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int

from ihprobe.core.errors import IhprobeError
from ihprobe.probes import inputs

CORRUPTIONS = ("second_half", "anchors")
DEFAULT_ROWS = 20

LogitMetric = Callable[
    [Float[torch.Tensor, "row query vocab"], Int[torch.Tensor, "row query"]],
    Float[torch.Tensor, " row"],
]


@dataclass
class PatchPair:
    """Clean and corrupted rows ``[batch, pos]``, read ``positions`` and clean ``targets``."""

    clean: Int[torch.Tensor, "batch pos"]
    corrupted: Int[torch.Tensor, "batch pos"]
    positions: Int[torch.Tensor, " query"]
    targets: Int[torch.Tensor, "batch query"]
    corruption: str = "given"


def logit_diff(
    logits: Float[torch.Tensor, "row query vocab"], targets: Int[torch.Tensor, "row query"]
) -> Float[torch.Tensor, " row"]:
    """Per row: mean over queries of ``logit[target] - mean(logits)``.

    Example:
        >>> logit_diff(torch.tensor([[[0.0, 3.0, 0.0]]]), torch.tensor([[1]]))
        tensor([2.])
    """
    target = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (target - logits.mean(-1)).mean(-1)


def induction_pair(
    model,
    *,
    corruption: str = "second_half",
    n: int | None = None,
    batch: int = DEFAULT_ROWS,
    seed: int = 0,
) -> PatchPair:
    """Repeated random tokens and one of :data:`CORRUPTIONS` of them (table above).

    Raises:
        IhprobeError: an unknown corruption, ``2n`` beyond the context, or fewer than ``2n``
            usable token ids (the corrupted ids must differ from the clean ones).
    """
    if corruption not in CORRUPTIONS:
        raise IhprobeError(f"corruption must be one of {', '.join(CORRUPTIONS)} ({corruption!r}).")
    n = inputs.default_n(model.cfg.n_ctx) if n is None else n
    inputs._check_fits(n, 0, model.cfg.n_ctx, "n")
    generator = torch.Generator().manual_seed(seed)
    drawn = inputs.distinct_ids(inputs.content_ids(model), batch, 2 * n, generator)
    s, fresh = drawn[:, :n], drawn[:, n:]
    clean = torch.cat([s, s], dim=1)
    queries = torch.arange(n, 2 * n, device="cpu")  # the seeded rows are drawn on the CPU
    if corruption == "second_half":
        corrupted = torch.cat([s, fresh], dim=1)
    else:
        anchors = torch.arange(
            0, n - 1 + n % 2, 2, device="cpu"
        )  # s_i at even i, never the last answer
        corrupted = clean.clone()
        corrupted[:, anchors] = fresh[:, anchors]
        queries = anchors + n
    device = model.cfg.device
    return PatchPair(
        clean=clean.to(device),
        corrupted=corrupted.to(device),
        positions=queries.to(device),
        targets=clean[:, queries - n + 1].to(device),
        corruption=corruption,
    )


def token_pair(
    model,
    clean: Int[torch.Tensor, "batch pos"],
    corrupted: Int[torch.Tensor, "batch pos"],
    positions: Int[torch.Tensor, " query"] | None = None,
) -> PatchPair:
    """Your own clean and corrupted rows; the metric reads ``positions`` (default: every
    position but the last) against the clean next token.

    Example:
        >>> pair = token_pair(model, clean_rows, corrupted_rows)            # doctest: +SKIP
    """
    for name, rows in (("clean", clean), ("corrupted", corrupted)):
        if not isinstance(rows, torch.Tensor) or rows.ndim != 2 or rows.is_floating_point():
            raise IhprobeError(f"{name} must be an integer tensor [batch, pos] of token ids.")
        if rows.min() < 0 or rows.max() >= model.cfg.d_vocab:
            raise IhprobeError(f"{name} holds ids outside [0, {model.cfg.d_vocab}).")
    if clean.shape != corrupted.shape or clean.shape[1] < 2:
        raise IhprobeError(
            f"clean {tuple(clean.shape)} and corrupted {tuple(corrupted.shape)} must have the same "
            "shape [batch, pos] with at least 2 positions."
        )
    length = clean.shape[1]
    clean, corrupted = clean.cpu(), corrupted.cpu()  # checked and indexed here, then moved
    positions = (
        torch.arange(length - 1, device="cpu")
        if positions is None
        else torch.as_tensor(positions, device="cpu")
    )
    if len(positions) == 0 or positions.min() < 0 or positions.max() >= length - 1:
        raise IhprobeError(f"positions must be in 0..{length - 2} (the next token is the target).")
    device = model.cfg.device
    return PatchPair(
        clean=clean.to(device),
        corrupted=corrupted.to(device),
        positions=positions.to(device),
        targets=clean[:, positions + 1].to(device),
    )
