"""Which heads an ablation switches off: the top set by a head score, and random baselines.

Top sets (``scope``):

* ``"layer"`` -- [B]'s protocol: the top ``k_l`` heads of every layer, with
  ``k_l = max(1, ceil(top * n_heads))`` for a fraction ``top`` or ``k_l = top`` for a count.
* ``"global"`` -- the top ``K`` heads of the whole model, ``K = max(1, ceil(top * n_layers *
  n_heads))`` for a fraction or ``K = top`` for a count.

Baselines (``baseline``), each drawn ``random`` times from the heads outside the top set:

* ``"layer-matched"`` -- as many heads in every layer as the top set has there ([B]'s).
* ``"global"`` -- as many heads in total, from anywhere in the model.
* ``"score-matched"`` -- one head per top head, from the stratum of non-top heads whose score
  (the ranking score, or any ``match`` score such as attention entropy) is nearest to it, so
  the baseline holds heads like the top set rather than previous-token or sink heads.

Draws are distinct sets when at least ``random`` distinct sets exist; when fewer exist, the
draws repeat them (the result says how many distinct sets there are).

>>> top = top_set(torch.tensor([[0.1, 0.9], [0.5, 0.0]]), top=1, scope="global")
>>> top
[(0, 1)]
>>> baseline_sets(torch.tensor([[0.1, 0.9], [0.5, 0.0]]), top, random=2).draws
[[(0, 0)], [(0, 0)]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float

from ihprobe.causal.choices import BASELINES, SCOPES, Baseline, Scope
from ihprobe.core.errors import IhprobeError

Head = tuple[int, int]
MAX_ENUMERATED = 100_000  # distinct baseline sets counted exactly up to this many


def heads_per_layer(n_heads: int, top: float | int) -> int:
    """Heads taken from ``n_heads``: ``max(1, ceil(top * n_heads))`` for a fraction in (0, 1],
    ``top`` itself for an integer count ``k >= 1``.

    >>> heads_per_layer(12, 0.02), heads_per_layer(4, 0.5), heads_per_layer(100, 0.025)
    (1, 2, 3)
    >>> heads_per_layer(12, 2)
    2
    """
    if isinstance(top, int) and not isinstance(top, bool) and top >= 1:
        return top
    if isinstance(top, bool) or not isinstance(top, (int, float)) or not 0 < top <= 1:
        raise IhprobeError(
            f"top={top} is not a fraction in (0, 1] nor a count k >= 1; pass e.g. top=0.02 for "
            "the top 2% of heads or top=1 for the single top head."
        )
    return max(1, math.ceil(round(top * n_heads, 9)))


def check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise IhprobeError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}.")


def check_random(random: int) -> None:
    """Raise unless ``random`` is at least one draw."""
    if random < 1:
        raise IhprobeError(
            f"random={random}: the baseline needs at least one random draw ([B] uses 20)."
        )


def _descending(values: torch.Tensor) -> torch.Tensor:
    """Indices from the highest value down; ties to the lower index, NaN last."""
    s = torch.nan_to_num(values.double().cpu(), nan=-math.inf)
    return torch.sort(-s, dim=-1, stable=True).indices


def top_set(
    scores: Float[torch.Tensor, "layer head"], *, top: float | int = 0.02, scope: Scope = "layer"
) -> list[Head]:
    """The top heads by ``scores``: per layer (``scope="layer"``) or over the whole model.

    >>> top_set(torch.tensor([[0.1, 0.9, 0.2], [0.5, 0.0, 0.3]]), top=1)
    [(0, 1), (1, 0)]
    """
    check_choice("scope", scope, SCOPES)
    n_layers, n_heads = scores.shape
    if scope == "layer":
        k = heads_per_layer(n_heads, top)
        if n_heads - k < k:
            raise IhprobeError(
                f"top={top} picks {k} of {n_heads} heads per layer, leaving {n_heads - k} for "
                f"the random baseline; pass top <= {(n_heads // 2) / n_heads:.3g} so that at "
                f"least {k} other heads remain."
            )
        order = _descending(scores)[:, :k]
        return [(layer, int(h)) for layer in range(n_layers) for h in sorted(order[layer])]
    k = heads_per_layer(n_layers * n_heads, top)
    if 2 * k > n_layers * n_heads:
        raise IhprobeError(
            f"top={top} picks {k} of {n_layers * n_heads} heads, leaving too few for the random "
            f"baseline; pass top <= {(n_layers * n_heads) // 2}."
        )
    flat = sorted(int(i) for i in _descending(scores.flatten())[:k])
    return [(i // n_heads, i % n_heads) for i in flat]


def excluding(
    scores: Float[torch.Tensor, "layer head"],
    other: Float[torch.Tensor, "layer head"],
    *,
    top: float | int = 0.02,
    scope: Scope = "layer",
) -> Float[torch.Tensor, "layer head"]:
    """``scores`` with the other kind's top set (by ``other``, same ``top`` and ``scope``) set
    one below the lowest score, so it ranks last: Yin & Steinhardt's exclusion ablation (the top
    FV heads sparing the induction heads, and the other way round).

    >>> excluding(torch.tensor([[0.9, 0.5], [0.0, 0.25]]), torch.tensor([[1.0, 0.0], [0.0, 0.0]]),
    ...           top=1, scope="global").tolist()
    [[-1.0, 0.5], [0.0, 0.25]]
    """
    left = scores.detach().double().cpu().clone()
    low = float(torch.nan_to_num(left, nan=math.inf).min()) - 1.0
    for layer, h in top_set(other.detach().float().cpu(), top=top, scope=scope):
        left[layer, h] = low
    return left.float()


def without_signature(
    scores: Float[torch.Tensor, "layer head"],
    chosen: list[Head],
    floor: float,
    *,
    scope: Scope,
    by: str,
    formed: float | None = None,
) -> tuple[list[Head], list[str]]:
    """The top set without its heads at chance, and a note for each head that is left in or out.

    ``floor`` is twice the ranking score's chance level. Over the whole model (``"global"``) a
    head at or below it never joins the top set, unless no head is above it (the verdict then
    finds no induction heads to test). [B]'s per-layer protocol keeps its heads in every layer;
    a note names each one at chance (it is ablated without the signature) and each one below
    ``formed``, the level that counts as formed.

    >>> s = torch.tensor([[0.9, 0.01, 0.0], [0.5, 0.8, 0.02]])
    >>> without_signature(s, [(0, 0), (1, 1), (1, 2)], 0.05, scope="global", by="ps")
    ([(0, 0), (1, 1)], ['left out of the top set at chance (ps <= 0.05, twice chance): L1H2 0.02'])
    >>> _, notes = without_signature(s, [(0, 1), (1, 0)], 0.05, scope="layer", by="ps", formed=0.6)
    >>> for note in notes: print(note)
    [B]'s per-layer top set ablates L0H1 (ps 0.01 <= 0.05, twice chance) without the signature
    [B]'s per-layer top set holds L1H0 (ps 0.5): above chance, below the 0.6 that counts as formed
    """
    at_chance = [(layer, h) for layer, h in chosen if float(scores[layer, h]) <= floor]
    if scope == "global":
        if not at_chance or len(at_chance) == len(chosen):
            return chosen, []
        named = ", ".join(f"L{layer}H{h} {float(scores[layer, h]):.2g}" for layer, h in at_chance)
        kept = [head for head in chosen if head not in at_chance]
        return kept, [
            f"left out of the top set at chance ({by} <= {floor:.2g}, twice chance): {named}"
        ]
    notes = []
    for layer, h in chosen:
        value = float(scores[layer, h])
        if value <= floor:
            empty = all(float(v) <= floor for v in scores[layer])
            notes.append(
                f"[B]'s per-layer top set ablates L{layer}H{h} ({by} {value:.2g} <= {floor:.2g}, "
                "twice chance) without the signature"
                + (f": layer {layer} has no head above chance there" if empty else "")
            )
        elif formed is not None and value < formed:
            notes.append(
                f"[B]'s per-layer top set holds L{layer}H{h} ({by} {value:.2g}): above chance, "
                f"below the {formed:g} that counts as formed"
            )
    return chosen, notes


@dataclass(frozen=True)
class Draws:
    """The baseline's head sets, and how many distinct sets the baseline could draw at all
    (None when more than ``MAX_ENUMERATED``); ``repeats`` is True when draws repeat sets."""

    draws: list[list[Head]]
    distinct: int | None
    repeats: bool


def baseline_sets(
    scores: Float[torch.Tensor, "layer head"],
    top: Sequence[Head],
    *,
    baseline: Baseline = "layer-matched",
    random: int = 20,
    seed: int = 0,
    match: Float[torch.Tensor, "layer head"] | None = None,
) -> Draws:
    """``random`` baseline sets of heads outside ``top`` (see the module docstring).

    Distinct sets are drawn while at least ``random`` exist; otherwise draws repeat them.
    ``match`` is the score a ``"score-matched"`` baseline matches on (default ``scores``).
    """
    check_choice("baseline", baseline, BASELINES)
    check_random(random)
    n_layers, n_heads = scores.shape
    outside = torch.ones(n_layers * n_heads, dtype=torch.bool, device="cpu")
    outside[[layer * n_heads + h for layer, h in top]] = False
    if baseline == "score-matched":
        pools = _strata(match if match is not None else scores, top, outside)
    else:
        counts = torch.bincount(
            torch.tensor([layer for layer, _ in top], device="cpu"), minlength=n_layers
        )
        pools = (counts, outside)
    draw = {"layer-matched": _layer_matched, "global": _global, "score-matched": _score_matched}
    distinct = _count_distinct(baseline, pools, outside, n_heads, len(top))
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(random, n_layers, n_heads, generator=g, device="cpu")
    sets = [draw[baseline](keys[r], pools, n_heads) for r in range(random)]
    repeats = distinct is not None and distinct < random
    if not repeats:  # redraw a repeated set from fresh keys until every set is distinct
        seen: set[tuple[Head, ...]] = set()
        for r in range(random):
            while tuple(sets[r]) in seen:
                sets[r] = draw[baseline](
                    torch.rand(n_layers, n_heads, generator=g, device="cpu"), pools, n_heads
                )
            seen.add(tuple(sets[r]))
    return Draws(sets, distinct, repeats)


def _layer_matched(keys: torch.Tensor, pools, n_heads: int) -> list[Head]:
    counts, outside = pools
    keys = keys.where(outside.view(keys.shape), torch.full_like(keys, -1.0))
    return [
        (layer, int(h))
        for layer, c in enumerate(counts.tolist())
        for h in keys[layer].topk(c).indices.sort().values
    ]


def _global(keys: torch.Tensor, pools, n_heads: int) -> list[Head]:
    counts, outside = pools
    flat = keys.flatten().where(outside, torch.full_like(keys.flatten(), -1.0))
    chosen = sorted(int(i) for i in flat.topk(int(counts.sum())).indices)
    return [(i // n_heads, i % n_heads) for i in chosen]


def _score_matched(keys: torch.Tensor, pools, n_heads: int) -> list[Head]:
    """One head per top head: the highest key among its stratum's heads not yet taken."""
    flat, chosen = keys.flatten(), []
    for pool in pools:
        free = [i for i in pool if i not in chosen]
        chosen.append(max(free, key=lambda i: float(flat[i])))
    return [(i // n_heads, i % n_heads) for i in sorted(chosen)]


def _strata(match: torch.Tensor, top: Sequence[Head], outside: torch.Tensor) -> list[list[int]]:
    """For each top head, the non-top heads nearest to it in ``match``, nearest first.

    A stratum holds ``max(3, ceil(others / (4 * K)))`` heads, so the K strata together span
    about a quarter of the other heads, plus ``K - 1`` so that one stays free when earlier top
    heads of the same draw took theirs.
    """
    n_heads = match.shape[1]
    values = torch.nan_to_num(match.double().cpu().flatten(), nan=math.inf)
    others = outside.nonzero().flatten()
    size = min(len(others), max(3, math.ceil(len(others) / (4 * len(top)))) + len(top) - 1)
    pools = []
    for layer, h in top:
        distance = (values[others] - values[layer * n_heads + h]).abs()
        nearest = others[torch.sort(distance, stable=True).indices]
        pools.append([int(i) for i in nearest[:size]])
    return pools


def _count_distinct(baseline: str, pools, outside: torch.Tensor, n_heads: int, k: int):
    """How many distinct sets the baseline can draw (None when more than ``MAX_ENUMERATED``)."""
    if baseline == "score-matched":
        total = math.prod(len(p) for p in pools)
        if total > MAX_ENUMERATED:
            return None
        found = {frozenset(c) for c in _product(pools) if len(set(c)) == len(c)}
        return len(found)
    counts, _ = pools
    free = outside.view(-1, n_heads).sum(1).tolist()
    if baseline == "layer-matched":
        total = math.prod(math.comb(f, c) for f, c in zip(free, counts.tolist(), strict=True))
    else:
        total = math.comb(int(outside.sum()), k)
    return total if total <= MAX_ENUMERATED else None


def _product(pools: list[list[int]]):
    if not pools:
        yield ()
        return
    for rest in _product(pools[1:]):
        for i in pools[0]:
            yield (i, *rest)


def head_sets(
    scores: Float[torch.Tensor, "layer head"],
    *,
    top: float | int = 0.02,
    random: int = 20,
    seed: int = 0,
    scope: Scope = "layer",
    baseline: Baseline = "layer-matched",
) -> tuple[list[Head], list[list[Head]]]:
    """The top set and ``random`` baseline draws: :func:`top_set` then :func:`baseline_sets`.

    Example:
        >>> top, rand = head_sets(torch.tensor([[0.1, 0.9, 0.2], [0.5, 0.0, 0.3]]), random=2)
        >>> top
        [(0, 1), (1, 0)]
        >>> all(len(d) == 2 and not set(d) & set(top) for d in rand)
        True
    """
    chosen = top_set(scores, top=top, scope=scope)
    return chosen, baseline_sets(scores, chosen, baseline=baseline, random=random, seed=seed).draws
