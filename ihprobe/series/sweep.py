"""The one loop over checkpoints: each checkpoint's model, built once and re-filled with the next
checkpoint's weights, handed to a function; under ``torchrun --nproc-per-node N`` each rank
takes every N-th checkpoint (:mod:`ihprobe.series.shard`) and every rank gets all the results.

>>> [ckpt.step for ckpt, _ in map_checkpoints([], lambda ckpt, model: None)]
[]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import torch
from tqdm.auto import tqdm

from ihprobe.core.stages import Counter
from ihprobe.io.models import fill_provenance
from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import resolve
from ihprobe.io.swap import load_or_swap
from ihprobe.io.weights import weights_hash
from ihprobe.series.shard import each_share

log = logging.getLogger(__name__)
Result = TypeVar("Result")


def walk(
    ckpts: Sequence[Checkpoint], *, progress: bool | None = False, desc: str = "checkpoints"
) -> Iterator[Checkpoint]:
    """Every checkpoint in order, with a tqdm bar (``progress``; None: only on a terminal) and a
    stage line each with the time left: the loop every sweep over checkpoints goes through.

    >>> [c.step for c in walk([Checkpoint("a", step=1), Checkpoint("b", step=2)])]
    [1, 2]
    """
    bar = tqdm(ckpts, desc=desc, unit="ckpt", disable=None if progress is None else not progress)
    counter = Counter(log, desc, len(ckpts))  # a stage line each, with the time left
    for index, ckpt in enumerate(bar, 1):
        bar.set_postfix_str(ckpt.label)
        counter.start(index, ckpt.label)
        yield ckpt


def each_model(
    ckpts: Sequence[Checkpoint],
    *,
    progress: bool | None = False,
    desc: str = "checkpoints",
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
) -> Iterator[tuple[Checkpoint, object]]:
    """Each checkpoint with its loaded model on ``device``, built once and re-filled
    (``load_or_swap``).

    ``progress``: a tqdm bar (None: only on a terminal).

    The model's provenance gets the checkpoint's step and tokens where its files do not say.

    Example:
        >>> for ckpt, model in each_model(checkpoints("runs/demo")):     # doctest: +SKIP
        ...     print(ckpt.step, model.cfg.n_layers)
    """
    model = None
    for ckpt in walk(ckpts, progress=progress, desc=desc):
        where = {"revision": ckpt.revision, "device": device, "dtype": dtype}
        model = load_or_swap(model, ckpt.source, **where)
        fill_provenance(model, step=ckpt.step, tokens=ckpt.tokens)
        yield ckpt, model


def map_checkpoints(
    ckpts: Sequence[Checkpoint],
    fn: Callable[[Checkpoint, object], Result],
    *,
    progress: bool | None = False,
    desc: str = "checkpoints",
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
) -> list[tuple[Checkpoint, Result]]:
    """``fn(ckpt, model)`` at every checkpoint, in order, each model on this rank's device
    (:func:`each_model`); sharded over the ranks under torchrun, every rank getting every
    result. The bar shows on rank 0 only.

    Example:
        >>> found = map_checkpoints(checkpoints("runs/demo"), lambda c, m: m.cfg.n_layers)
        ... # doctest: +SKIP
    """

    def on_share(share: list[Checkpoint], world) -> list[Result]:
        bars = progress if world.main else False
        swept = each_model(share, progress=bars, desc=desc, device=world.device, dtype=dtype)
        return [fn(ckpt, model) for ckpt, model in swept]

    return list(zip(ckpts, each_share(on_share, ckpts, device), strict=True))


def checkpoint_hash(ckpt: Checkpoint) -> str:
    """The weights hash of a checkpoint (fetching a hub revision when it is not cached)."""
    return weights_hash(resolve(ckpt.source, revision=ckpt.revision))


class Duplicates:
    """Finds checkpoints whose weights equal an earlier one's; logs a warning for each."""

    def __init__(self):
        self.first: dict[str, str] = {}  # weights hash -> label of the first checkpoint

    def check(self, ckpt: Checkpoint, digest: str) -> str | None:
        """The earlier checkpoint with the same weights hash ``digest``, or None."""
        earlier = self.first.get(digest)
        if earlier is not None:
            log.warning("%s has the same weights as %s", ckpt.label, earlier)
        label = f"{ckpt.source}@{ckpt.revision}" if ckpt.revision else ckpt.source
        self.first.setdefault(digest, label)
        return earlier
