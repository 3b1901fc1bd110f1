"""The one loop over checkpoints: each checkpoint's model, built once and re-filled with the next
checkpoint's weights, handed to a function; under ``torchrun --nproc-per-node N`` each rank
takes every N-th checkpoint (:mod:`ihprobe.series.shard`) and every rank gets all the results.

>>> [ckpt.step for ckpt, _ in map_checkpoints([], lambda ckpt, model: None)]
[]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import TypeVar

import torch
from huggingface_hub import snapshot_download
from tqdm.auto import tqdm

from ihprobe.core.stages import Counter
from ihprobe.io.hub_cache import fetched
from ihprobe.io.models import fill_provenance
from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import resolve
from ihprobe.io.swap import load_or_swap
from ihprobe.io.tensor_reads import ReadCheckpoint
from ihprobe.io.weights import has_safetensors, read_checked, weights_hash
from ihprobe.series.prefetch import prefetched
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
        bar.set_postfix_str(ckpt.label, refresh=False)  # shown at the bar's own pace
        counter.start(index, ckpt.label)
        yield ckpt


def each_model(
    ckpts: Sequence[Checkpoint],
    *,
    progress: bool | None = False,
    desc: str = "checkpoints",
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    prefetch: int = 1,
    placement: dict | None = None,
) -> Iterator[tuple[Checkpoint, object]]:
    """Each checkpoint with its loaded model on ``device``, built once and re-filled
    (``load_or_swap``).

    ``progress``: a tqdm bar (None: only on a terminal).

    The model's provenance gets the checkpoint's step and tokens where its files do not say.
    ``prefetch``: checkpoints read ahead in a background thread while the current one is used
    (:mod:`ihprobe.series.prefetch`; 0: none). ``placement``: a device map (``device_map``,
    ``max_memory``, ``offload_folder`` of :func:`ihprobe.load`) each checkpoint is loaded
    afresh under, none read ahead.

    Example:
        >>> for ckpt, model in each_model(checkpoints("runs/demo")):     # doctest: +SKIP
        ...     print(ckpt.step, model.cfg.n_layers)
    """
    model, prefetch = None, 0 if placement else prefetch  # a read-ahead holds a whole checkpoint
    reading = prefetched(ckpts, read_ahead, ahead=prefetch, size=checkpoint_bytes)
    with closing(reading) as reads:
        for ckpt, (_, read) in zip(walk(ckpts, progress=progress, desc=desc), reads, strict=True):
            where = {"revision": ckpt.revision, "device": device, "dtype": dtype, "read": read}
            where["placement"] = placement
            model = load_or_swap(model, ckpt.source, **where)
            fill_provenance(model, step=ckpt.step, tokens=ckpt.tokens)
            yield ckpt, model


def checkpoint_bytes(ckpt: Checkpoint) -> int:
    """The bytes of a checkpoint's weight files when they are on disk (a local directory or a
    cached hub revision), else 0 (unknown until fetched): what reading it ahead holds."""
    path = Path(ckpt.source).expanduser()
    if not path.is_dir():
        where = {"revision": ckpt.revision, "local_files_only": True}
        try:
            path = Path(snapshot_download(ckpt.source, allow_patterns=["*.json"], **where))
        except Exception:  # noqa: BLE001 - not cached (or not a hub id): unknown
            return 0
    files = [*path.glob("*.safetensors"), *path.glob("*.bin"), *path.glob("*.pt")]
    return sum(f.stat().st_size for f in files if f.is_file())


def read_ahead(ckpt: Checkpoint) -> ReadCheckpoint | None:
    """The tensors of a safetensors checkpoint, read and checked (fetched when a hub revision
    is not cached and the hub is reachable); None for pickled weights, which load reads."""
    path = fetched(ckpt.source, ckpt.revision)
    return read_checked(path) if has_safetensors(path) else None


def map_checkpoints(
    ckpts: Sequence[Checkpoint],
    fn: Callable[[Checkpoint, object], Result],
    *,
    progress: bool | None = False,
    desc: str = "checkpoints",
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    prefetch: int = 1,
    placement: dict | None = None,
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
        where = {"device": world.device, "dtype": dtype, "prefetch": prefetch}
        where["placement"] = placement  # a device map (each_model)
        swept = each_model(share, progress=bars, desc=desc, **where)
        return [fn(ckpt, model) for ckpt, model in swept]

    return list(zip(ckpts, each_share(on_share, ckpts, device), strict=True))


def checkpoint_hash(ckpt: Checkpoint) -> str:
    """The weights hash of a checkpoint (fetching a hub revision when it is not cached)."""
    return weights_hash(resolve(ckpt.source, revision=ckpt.revision))
