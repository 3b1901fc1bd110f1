"""Which heads an ablation switches off: the top set by a head score, and random baselines.

SPEC section 4 ([B]): the top ``k_l = max(1, ceil(top * n_heads))`` heads of every layer by a
score, and ``random`` draws of as many other heads per layer.

>>> top, draws = head_sets(torch.tensor([[0.1, 0.9], [0.5, 0.0]]), top=0.5, random=2)
>>> top
[(0, 1), (1, 0)]
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float

from ihprobe.errors import IhprobeError

Head = tuple[int, int]


def heads_per_layer(n_heads: int, top: float) -> int:
    """``k_l = max(1, ceil(top * n_heads))``: at least one head per layer.

    >>> heads_per_layer(12, 0.02), heads_per_layer(4, 0.5), heads_per_layer(100, 0.025)
    (1, 2, 3)
    """
    if not 0 < top <= 1:
        raise IhprobeError(
            f"top={top} is not a fraction in (0, 1]; pass e.g. top=0.02 for the top 2% of "
            "heads per layer."
        )
    return max(1, math.ceil(round(top * n_heads, 9)))


def head_sets(
    scores: Float[torch.Tensor, "layer head"], *, top: float = 0.02, random: int = 20, seed: int = 0
) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]:
    """The top ``k_l`` heads of every layer by ``scores``, and ``random`` draws of as many others.

    Ties go to the lower head index; NaN scores rank last. Each random draw picks ``k_l`` heads
    per layer uniformly among the heads not in that layer's top set (draws may repeat when a
    layer has few heads).

    Example:
        >>> top, rand = head_sets(torch.tensor([[0.1, 0.9, 0.2], [0.5, 0.0, 0.3]]), random=2)
        >>> top
        [(0, 1), (1, 0)]
        >>> all(len(d) == 2 and not set(d) & set(top) for d in rand)
        True
    """
    heads_per_layer(1, top)
    check_random(random)
    n_layers, n_heads = scores.shape
    k = heads_per_layer(n_heads, top)
    if n_heads - k < k:
        raise IhprobeError(
            f"top={top} picks {k} of {n_heads} heads per layer, leaving {n_heads - k} for the "
            f"random baseline; pass top <= {(n_heads // 2) / n_heads:.3g} so that at least "
            f"{k} other heads remain."
        )
    s = torch.nan_to_num(scores.double().cpu(), nan=-math.inf)
    order = torch.sort(-s, dim=1, stable=True).indices  # descending, lower index first on ties
    top_idx = order[:, :k]
    top_set = [(layer, int(h)) for layer in range(n_layers) for h in sorted(top_idx[layer])]
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(random, n_layers, n_heads, generator=g)
    keys.scatter_(2, top_idx.expand(random, -1, -1), -1.0)  # never pick a top head
    drawn = keys.topk(k, dim=2).indices.sort(dim=2).values
    random_sets = [
        [(layer, int(h)) for layer in range(n_layers) for h in drawn[r, layer]]
        for r in range(random)
    ]
    return top_set, random_sets


def check_random(random: int) -> None:
    """Raise unless ``random`` is at least one draw."""
    if random < 1:
        raise IhprobeError(
            f"random={random}: the baseline needs at least one random draw (SPEC uses 20)."
        )
