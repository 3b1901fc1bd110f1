"""Work shared by the ranks of a ``torchrun`` job: each rank takes every N-th item, and every
rank gets all the results back in the items' order.

Outside torchrun (WORLD_SIZE 1) :func:`each_share` is a plain call on all the items, so code
written with it runs the same in one process or many::

    torchrun --nproc-per-node 8 -m ihprobe scan EleutherAI/pythia-160m --revision step1000 ...

>>> each_share(lambda items, world: [x * x for x in items], [1, 2, 3])
[1, 4, 9]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch.distributed as dist

from ihprobe.core.errors import IhprobeError
from ihprobe.core.world import World, join_world

Item = TypeVar("Item")
Result = TypeVar("Result")


def share(items: Sequence[Item], world: World) -> list[Item]:
    """The items this rank works on: every ``world.size``-th one, starting at its rank.

    Example:
        >>> share("abcde", World(rank=1, size=2))
        ['b', 'd']
    """
    return list(items[world.rank :: world.size])


def each_share(
    work: Callable[[list[Item], World], list[Result]],
    items: Sequence[Item],
    device: str = "cpu",
) -> list[Result]:
    """``work(share, world)`` on this rank's share of ``items`` (one result per item, in order);
    the results of every rank, gathered into the order of ``items``, on every rank.

    ``device``: ``cpu``, ``cuda`` (each rank takes ``cuda:LOCAL_RANK``) or ``auto``. An
    :class:`IhprobeError` on any rank is raised on every rank, so no rank waits for ever.
    """
    with join_world(device) as world:
        if world.size == 1:
            return work(list(items), world)
        try:
            outcome: tuple[str, object] = ("done", work(share(items, world), world))
        except IhprobeError as err:
            outcome = ("error", str(err))
        gathered: list = [None] * world.size
        dist.all_gather_object(gathered, outcome)
    errors = [value for kind, value in gathered if kind == "error"]
    if errors:
        raise IhprobeError(errors[0])
    results = [value for _, value in gathered]
    if sum(map(len, results)) != len(items):
        raise RuntimeError("each_share: work must return one result per item of its share")
    return [results[i % world.size][i // world.size] for i in range(len(items))]
