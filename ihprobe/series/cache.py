"""The results cache over training: each checkpoint's rows (``layer, head, metric, value``)
cached under its weights hash and the settings that change them, in ``$IHPROBE_CACHE`` or
``~/.cache/ihprobe``. Re-running after new checkpoints appear computes only the new ones, and a
checkpoint whose weights equal an earlier one's is flagged in ``duplicate_of`` (published
series sometimes save one state under two steps). Hub revisions whose rows are cached are not
fetched again; with ``keep="none"`` each fetched revision leaves the HF cache once computed.

>>> checked_rows([[0, 0, "m", 0.5], [0, 1, "m", 0.25]]).shape
(2, 4)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from ihprobe import __version__
from ihprobe.core import cache
from ihprobe.core.cache import root as cache_root
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.io.hub_cache import (
    RevisionIndex,
    cached_before,
    check_keep,
    drop_revision,
    fetched,
)
from ihprobe.io.runs import Checkpoint, checkpoint_meta
from ihprobe.io.swap import load_or_swap
from ihprobe.io.tensor_reads import (
    Digests,
    ReadCheckpoint,
    cached_digests,
    digests_of,
)
from ihprobe.io.weights import check_files, has_safetensors, read_checked, weights_hash
from ihprobe.series.prefetch import prefetched
from ihprobe.series.repeats import Duplicates, Repeats, series_label
from ihprobe.series.shard import each_share
from ihprobe.series.sweep import checkpoint_bytes, walk

log = logging.getLogger(__name__)

ROW_COLUMNS = ["layer", "head", "metric", "value"]  # one cached row
CACHE_VERSION = 3  # bump when the cached rows change meaning (2: checked; 3: one per metric)


def cached_map(
    ckpts: Sequence[Checkpoint],
    fn: Callable[[object], pd.DataFrame],
    folder: str,
    settings: str,
    placement: dict | None = None,
    **options,
) -> pd.DataFrame:
    """``fn(model)`` (rows ``layer, head, metric, value``) at every checkpoint, cached (see
    :func:`cached_sweep` for ``options``); one model per process, re-filled with each
    checkpoint's weights only when its rows are not cached (each loaded afresh under a device
    map, ``placement``: :func:`~ihprobe.io.swap.load_or_swap`). With ``parts=`` (metric names)
    ``fn(model, missing)`` computes only the metrics whose entries are missing."""
    make = lambda device: Loaded(fn, device, placement)  # noqa: E731
    return cached_sweep(ckpts, make, folder, settings, **options)


class Loaded:
    """``fn`` of each checkpoint's model: the first loaded, later weights swapped in."""

    def __init__(self, fn: Callable[[object], pd.DataFrame], device: torch.device, placement=None):
        self.model, self.fn, self.device, self.placement = None, fn, device, placement

    def __call__(self, ckpt: Checkpoint, *missing, read: ReadCheckpoint | None = None):
        where = {"revision": ckpt.revision, "device": self.device, "read": read}
        where["placement"] = self.placement
        self.model = load_or_swap(self.model, ckpt.source, **where)
        return self.fn(self.model, *missing)[ROW_COLUMNS].reset_index(drop=True)


def cached_sweep(
    ckpts: Sequence[Checkpoint],
    make_compute: Callable[[torch.device], Callable[[Checkpoint], pd.DataFrame]],
    folder: str,
    settings: str,
    *,
    cache: bool | str | os.PathLike | None = True,
    tokens_per_step: int | None = None,
    progress: bool | None = False,
    device: str = "cpu",
    keep: str = "all",
    finite: bool = True,
    parts: Sequence[str] | None = None,
    threads: int | None = DEFAULT_THREADS,
    prefetch: int = 1,
) -> pd.DataFrame:
    """``compute(ckpt)`` (rows ``layer, head, metric, value``) of every checkpoint, cached in
    ``cache/folder`` under the weights hash and ``settings``, as one long table ordered by
    tokens, with provenance and ``duplicate_of`` (used by :func:`ihprobe.trajectory` and
    :func:`ihprobe.ablation_trajectory`). A cached entry is used only when it passes
    :func:`checked_rows` (``finite``: every value finite); otherwise it is computed again.
    ``make_compute(device)`` builds the function once per process; under torchrun each rank
    computes every N-th checkpoint (:mod:`ihprobe.series.shard`) and every rank gets the whole
    table. ``keep="none"`` streams hub revisions (see :func:`ihprobe.trajectory`). With ``parts``
    (metric names) each metric is cached on its own and ``compute(ckpt, missing)`` computes the
    missing ones, so a later call asking for any subset reuses them. The sweep runs with
    ``threads`` torch threads (``ihprobe.core.threads``; None: torch's setting). ``prefetch``:
    how many checkpoints are read (and fetched from the hub) ahead of the one computed on, in
    a background thread (:mod:`ihprobe.series.prefetch`; 0: none); the table is the same.
    A checkpoint some of whose tensors or shards repeat an earlier one's is logged and named in
    the ``repeats`` column (:mod:`ihprobe.series.repeats`)."""
    keep = check_keep(keep)

    def share_rows(share: list[Checkpoint], world) -> list[tuple]:
        """(weights hash, rows, checkpoint meta, tensor digests) of each checkpoint of this
        rank's share."""
        where = cache_root(cache)
        series = _Series(where, make_compute(world.device), folder, settings, keep, finite, parts)
        series.present = cached_before(share) if keep == "none" else set()
        bars = progress if world.main else False
        for ckpt in share:
            series.index(ckpt)  # made here, read by the prefetching thread
        reading = prefetched(share, series.fetch, ahead=prefetch, size=checkpoint_bytes)
        with closing(reading) as reads:
            walked = zip(walk(share, progress=bars, desc=folder), reads, strict=True)
            return [series.rows(ckpt, fetched) for ckpt, (_, fetched) in walked]

    duplicates, repeats = Duplicates(), Repeats()
    frames = []
    with torch_threads(threads):
        found = each_share(share_rows, ckpts, device)
    for ckpt, (digest, rows, meta, tensors) in zip(ckpts, found, strict=True):
        frames.append(with_provenance(rows, ckpt, meta, tokens_per_step))
        frames[-1]["duplicate_of"] = duplicates.check(ckpt, digest)
        repeat = repeats.check(series_label(ckpt), tensors)
        frames[-1]["repeats"] = repeat.describe() if repeat is not None else None
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def with_provenance(rows: pd.DataFrame, ckpt: Checkpoint, meta: dict, tokens_per_step):
    """The scan rows of one checkpoint with its model, revision, step and tokens in front."""
    step = ckpt.step if ckpt.step is not None else meta.get("step")
    tokens = ckpt.tokens if ckpt.tokens is not None else meta.get("tokens")
    if tokens is None and tokens_per_step and step is not None:
        tokens = step * tokens_per_step
    frame = rows.copy()
    frame.insert(0, "model", str(meta.get("run") or ckpt.run or ckpt.source))
    frame.insert(1, "revision", ckpt.revision)
    frame.insert(2, "step", pd.array([step] * len(frame), dtype="Int64"))
    frame.insert(3, "tokens", pd.array([tokens] * len(frame), dtype="Int64"))
    return frame


@dataclass
class Fetched:
    """One checkpoint as read ahead: its weights hash, its directory (None when its rows are
    cached under its hub revision), its tensors (None when its rows are cached) and its
    per-tensor digests (when known)."""

    digest: str
    path: Path | None = None
    read: ReadCheckpoint | None = None
    tensors: Digests | None = None


class _Series:
    """The rows of each checkpoint: from this call, the results cache, or ``compute``.

    Hub revisions go through a :class:`~ihprobe.io.hub_cache.RevisionIndex`, so a revision whose
    scan is cached is not fetched; with ``keep="none"`` a fetched revision leaves the HF cache
    once it is scanned. With ``parts`` (metric names) each metric has its own entry.
    """

    def __init__(
        self, directory, compute, folder: str, settings: str, keep: str, finite: bool, parts=None
    ):
        self.directory, self.compute, self.keep, self.finite = directory, compute, keep, finite
        self.folder, self.settings, self.parts = folder, settings, parts
        self.done: dict[str, pd.DataFrame] = {}  # weights hash -> rows, within this call
        self.indexes: dict[str, RevisionIndex] = {}
        self.present: set = set()  # (source, revision) in the HF cache before the series

    def fetch(self, ckpt: Checkpoint) -> Fetched:
        """What :meth:`rows` needs from disk or the hub (run ahead, in the prefetching thread):
        the weights hash, and the tensors when the rows are not cached."""
        index = self.indexes.get(ckpt.source) if ckpt.revision is not None else None
        digest = index.get(ckpt.revision) if index is not None else None
        if digest is not None and self._known(digest) is not None:
            return Fetched(digest, None, None, digests_of(digest, self.directory))
        path = fetched(ckpt.source, ckpt.revision)
        if not has_safetensors(path):
            return Fetched(weights_hash(path), path)
        known = cached_digests(path, self.directory)
        if known is not None and known.whole is not None and self._known(known.whole) is not None:
            check_files(path)  # its rows are cached: checked, not read
            return Fetched(known.whole, path, None, known)
        read = read_checked(path, self.directory)  # files checked, then every tensor read once
        return Fetched(read.weights_hash, path, read, read.digests)

    def rows(self, ckpt: Checkpoint, fetched: Fetched) -> tuple:
        """``(weights hash, scan rows, checkpoint metadata, tensor digests)`` of ``ckpt``."""
        digest, path, read = fetched.digest, fetched.path, fetched.read
        rows = self._known(digest)
        if rows is not None and path is None:  # cached under the revision's recorded hash
            return digest, rows, {}, fetched.tensors
        if rows is None and self.parts is None:
            rows = self.compute(ckpt, read=read)
            if self.directory is not None:
                cache.write(self._file(digest), _records(rows))
        elif rows is None:
            rows = self._by_part(ckpt, digest, read)
        self.done[digest] = rows
        index = self.indexes.get(ckpt.source) if ckpt.revision is not None else None
        if index is not None:
            index.record(ckpt.revision, digest)
        meta = checkpoint_meta(path)
        if self.keep == "none" and (ckpt.source, ckpt.revision) not in self.present:
            drop_revision(path)  # this series' download (recorded), nothing else
        return digest, rows, meta, fetched.tensors

    def index(self, ckpt: Checkpoint) -> RevisionIndex | None:
        if ckpt.revision is None:
            return None
        if ckpt.source not in self.indexes:
            self.indexes[ckpt.source] = RevisionIndex(self.directory, ckpt.source)
        return self.indexes[ckpt.source]

    def _file(self, digest: str, part: str | None = None) -> Path:
        name = f"{digest[:32]}-{self.settings}" + (f"-{part}" if part else "")
        return self.directory / self.folder / f"{name}.json"

    def _known(self, digest: str, part: str | None = None) -> pd.DataFrame | None:
        """The rows of ``digest`` (of one ``part``) from this call or the cache, else None."""
        if digest in self.done and part is None:
            return self.done[digest]
        if self.directory is None:
            return None
        if self.parts is not None and part is None:  # every part cached, or None
            found = [self._known(digest, name) for name in self.parts]
            return None if any(f is None for f in found) else pd.concat(found, ignore_index=True)
        check = lambda value: checked_rows(value, self.finite)  # noqa: E731
        return cache.read(self._file(digest, part), check)

    def _by_part(self, ckpt: Checkpoint, digest: str, read=None) -> pd.DataFrame:
        """Each part (a metric) from its own cache entry; the missing ones computed together
        (``compute(ckpt, missing)``), so any later call that asks for a subset reuses them."""
        found = {part: self._known(digest, part) for part in self.parts}
        missing = [part for part, rows in found.items() if rows is None]
        if missing:
            computed = self.compute(ckpt, missing, read=read)
            for part in missing:
                found[part] = computed[computed["metric"] == part].reset_index(drop=True)
                if self.directory is not None and len(found[part]):
                    cache.write(self._file(digest, part), _records(found[part]))
        return pd.concat([found[part] for part in self.parts], ignore_index=True)


def settings_key(metrics, scan_kwargs: dict) -> str:
    """A short hash of everything besides the weights that changes a scan's numbers."""

    def plain(value):
        if hasattr(value, "tolist"):  # tensors of user tokens
            return value.tolist()
        return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)

    key = {
        "version": [__version__, CACHE_VERSION],
        "metrics": sorted(metrics) if metrics is not None else None,
        "scan": {k: plain(v) for k, v in sorted(scan_kwargs.items())},
    }
    return cache.key(key)


def checked_rows(value, finite: bool = True) -> pd.DataFrame:
    """Cached rows ``[[layer, head, metric, value], ...]`` as a table, or ValueError when they
    are not rows of that schema, repeat a ``(layer, head, metric)``, cover a different grid of
    heads for different metrics, or hold a non-finite value (with ``finite``).

    Example:
        >>> checked_rows([[0, 0, "m", 0.5], [0, 1, "m", 0.25], [None, None, "loss", 2.0]]).shape
        (3, 4)
        >>> checked_rows([[0, 0, "m", float("nan")]])
        Traceback (most recent call last):
        ValueError: nan is not finite
    """
    if not isinstance(value, list) or not value:
        raise ValueError("no rows")
    rows = []
    for row in value:
        if not isinstance(row, list) or len(row) != 4 or not isinstance(row[2], str):
            raise ValueError(f"{row!r} is not a [layer, head, metric, value] row")
        layer, head = cache.index(row[0]), cache.index(row[1])
        if (layer is None) != (head is None):
            raise ValueError(f"{row!r} names a layer without a head or a head without a layer")
        rows.append((layer, head, row[2], cache.number(row[3], finite=finite)))
    if len({row[:3] for row in rows}) != len(rows):
        raise ValueError("a (layer, head, metric) appears twice")
    grids = {}
    for layer, head, metric, _ in rows:
        if layer is not None:
            grids.setdefault(metric, set()).add((layer, head))
    shapes = {frozenset(grid) for grid in grids.values()}
    if len(shapes) > 1 or any(_holes(grid) for grid in shapes):
        raise ValueError("the head rows do not cover one full grid of layers and heads")
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    frame[["layer", "head"]] = frame[["layer", "head"]].astype("Int64")
    return frame


def _holes(grid: frozenset) -> bool:
    """Whether ``grid`` misses some (layer, head) of ``range(layers) x range(heads)``."""
    layers, heads = max(layer for layer, _ in grid) + 1, max(head for _, head in grid) + 1
    return len(grid) != layers * heads


def _records(rows: pd.DataFrame) -> list[list]:
    """The rows as JSON lists ``[layer or None, head or None, metric, value]``."""
    return [
        [None if pd.isna(layer) else int(layer), None if pd.isna(head) else int(head), m, float(v)]
        for layer, head, m, v in rows.itertuples(index=False)
    ]
