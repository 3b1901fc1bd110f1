"""The results cache over training: each checkpoint's rows (``layer, head, metric, value``)
cached under its weights hash, its config and the settings that change them, in
``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``. Re-running after new checkpoints appear computes only
the new ones, and a checkpoint whose weights equal an earlier one's is flagged in
``duplicate_of`` (published series sometimes save one state under two steps). Hub revisions
whose rows are cached are not fetched again; with ``keep="none"`` each fetched revision leaves
the HF cache once computed.
Each checkpoint's entry is written (atomically) as soon as it is computed, so a series that is
interrupted resumes from the next checkpoint, and a finished one runs again offline.

>>> checked_rows([[0, 0, "m", 0.5], [0, 1, "m", 0.25]]).shape
(2, 4)
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from ihprobe.core import cache
from ihprobe.core.cache import root as cache_root
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.io.hub_cache import (
    RevisionIndex,
    cached_before,
    check_keep,
    drop_revision,
    fetched,
    leftover,
    settled,
)
from ihprobe.io.provenance import Provenance
from ihprobe.io.runs import Checkpoint, checkpoint_meta
from ihprobe.io.sources import config_digest
from ihprobe.io.swap import load_or_swap
from ihprobe.io.tensor_reads import (
    Digests,
    ReadCheckpoint,
    cached_digests,
    digests_of,
)
from ihprobe.io.weights import check_files, has_safetensors, read_checked, weights_hash
from ihprobe.series.entries import (
    ROW_COLUMNS,
    as_records,
    checked_entry,
    checked_rows,
    settings_key,  # noqa: F401 - imported from here by the series
)
from ihprobe.series.prefetch import prefetched
from ihprobe.series.repeats import Duplicates, Repeats, series_label
from ihprobe.series.shard import each_share
from ihprobe.series.sweep import checkpoint_bytes, walk

log = logging.getLogger(__name__)


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
    """``fn`` of each checkpoint's model (rows, or ``(rows, settings)`` for a series kept with
    ``records``): the first loaded in ``dtype``, later weights swapped in."""

    def __init__(self, fn: Callable, device: torch.device, placement=None, dtype="float32"):
        self.model, self.fn, self.device, self.placement = None, fn, device, placement
        self.dtype = dtype

    def __call__(self, ckpt: Checkpoint, *missing, read: ReadCheckpoint | None = None):
        where = {"revision": ckpt.revision, "device": self.device, "read": read}
        where.update(placement=self.placement, dtype=self.dtype)
        self.model = load_or_swap(self.model, ckpt.source, **where)
        found = self.fn(self.model, *missing)
        if isinstance(found, tuple):  # (rows, settings): the settings recorded beside the rows
            return found[0][ROW_COLUMNS].reset_index(drop=True), found[1]
        return found[ROW_COLUMNS].reset_index(drop=True)


@dataclass
class Swept:
    """One checkpoint as :func:`cached_checkpoints` returns it: its rows, its checkpoint
    metadata (``ihprobe.json``, recorded for hub revisions), the settings recorded with the
    rows (``records``; else None), and the earlier checkpoint of identical weights and the
    shards or tensors it repeats (or None)."""

    ckpt: Checkpoint
    rows: pd.DataFrame
    meta: dict
    settings: dict | None
    duplicate_of: str | None
    repeats: str | None

    @property
    def provenance(self) -> Provenance:
        """Model (the run's name, else the source), revision, step and tokens of the rows."""
        return provenance_of(self.ckpt, self.meta)


def cached_sweep(
    ckpts: Sequence[Checkpoint],
    make_compute: Callable[[torch.device], Callable[[Checkpoint], pd.DataFrame]],
    folder: str,
    settings: str,
    *,
    tokens_per_step: int | None = None,
    **options,
) -> pd.DataFrame:
    """``compute(ckpt)`` (rows ``layer, head, metric, value``) of every checkpoint, cached
    (:func:`cached_checkpoints`, which takes ``options``), as one long table ordered by tokens,
    with provenance (``tokens = step * tokens_per_step`` where a checkpoint does not say),
    ``duplicate_of`` and ``repeats`` (used by :func:`ihprobe.trajectory` and
    :func:`ihprobe.ablation_trajectory`)."""
    frames = []
    for done in cached_checkpoints(ckpts, make_compute, folder, settings, **options):
        frames.append(with_provenance(done.rows, done.ckpt, done.meta, tokens_per_step))
        frames[-1]["duplicate_of"] = done.duplicate_of
        frames[-1]["repeats"] = done.repeats
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def cached_checkpoints(
    ckpts: Sequence[Checkpoint],
    make_compute: Callable[[torch.device], Callable],
    folder: str,
    settings: str,
    *,
    cache: bool | str | os.PathLike | None = True,
    progress: bool | None = False,
    device: str = "cpu",
    keep: str = "all",
    finite: bool = True,
    parts: Sequence[str] | None = None,
    threads: int | None = DEFAULT_THREADS,
    prefetch: int = 1,
    records: bool = False,
    desc: str | None = None,
) -> list[Swept]:
    """``compute(ckpt)`` (rows ``layer, head, metric, value``) of every checkpoint, in order,
    cached in ``cache/folder`` under the weights hash, the config and ``settings``, each entry
    written as soon as its checkpoint is done (over 60 lines with this docstring, which names
    every keyword). A cached entry is used only when it passes
    :func:`checked_rows` (``finite``: every value finite); otherwise it is computed again.
    ``make_compute(device)`` builds the function once per process; under torchrun each rank
    computes every N-th checkpoint (:mod:`ihprobe.series.shard`) and every rank gets them all.
    ``keep="none"`` streams hub revisions (see :func:`ihprobe.trajectory`). With ``parts``
    (metric names) each metric is cached on its own and ``compute(ckpt, missing)`` computes the
    missing ones, so a later call asking for any subset reuses them. With ``records``
    ``compute`` returns ``(rows, settings)`` (plain JSON) and the settings are kept in the same
    entry (:attr:`Swept.settings`). The sweep runs with ``threads`` torch threads
    (``ihprobe.core.threads``; None: torch's setting). ``prefetch``: how many checkpoints are
    read (and fetched from the hub) ahead of the one computed on, in a background thread
    (:mod:`ihprobe.series.prefetch`; 0: none); the results are the same. ``desc``: the bar's
    and stage lines' name (default ``folder``). A checkpoint some of whose tensors or shards
    repeat an earlier one's is logged and named in ``repeats`` (:mod:`ihprobe.series.repeats`).

    Example:
        >>> make = lambda device: Loaded(lambda model: scan(model).to_frame(), device)
        >>> done = cached_checkpoints(checkpoints("runs/demo"), make, "scans", "k")
        ... # doctest: +SKIP
        >>> done[-1].provenance.step, done[-1].rows.shape  # doctest: +SKIP
    """
    keep = check_keep(keep)

    def share_rows(share: list[Checkpoint], world) -> list[tuple]:
        """(weights hash, rows, checkpoint meta, tensor digests, settings) of each checkpoint
        of this rank's share."""
        where = cache_root(cache)
        compute = make_compute(world.device)
        options = {"finite": finite, "parts": parts, "records": records}
        series = _Series(where, compute, folder, settings, keep, **options)
        series.present = cached_before(share) if keep == "none" else set()
        bars = progress if world.main else False
        for ckpt in share:
            series.index(ckpt)  # made here, read by the prefetching thread
        reading = prefetched(share, series.fetch, ahead=prefetch, size=checkpoint_bytes)
        with closing(reading) as reads:
            walked = zip(walk(share, progress=bars, desc=desc or folder), reads, strict=True)
            return [series.rows(ckpt, fetched) for ckpt, (_, fetched) in walked]

    duplicates, repeats, swept = Duplicates(), Repeats(), []
    with torch_threads(threads):
        found = each_share(share_rows, ckpts, device)
    for ckpt, (digest, rows, meta, tensors, kept) in zip(ckpts, found, strict=True):
        repeat = repeats.check(series_label(ckpt), tensors)
        said = repeat.describe() if repeat is not None else None
        swept.append(Swept(ckpt, rows, meta, kept, duplicates.check(ckpt, digest), said))
    return swept


def provenance_of(ckpt: Checkpoint, meta: dict, tokens_per_step=None) -> Provenance:
    """A checkpoint's model (its run's name, else its source), revision, step and tokens, from
    the checkpoint and its ``ihprobe.json`` (``meta``).

    >>> provenance_of(Checkpoint("org/m", "step2", 2), {}, tokens_per_step=10).label
    'org/m · step2 · step 2 · 20 tokens'
    """
    step = ckpt.step if ckpt.step is not None else meta.get("step")
    tokens = ckpt.tokens if ckpt.tokens is not None else meta.get("tokens")
    if tokens is None and tokens_per_step and step is not None:
        tokens = step * tokens_per_step
    return Provenance(str(meta.get("run") or ckpt.run or ckpt.source), ckpt.revision, step, tokens)


def with_provenance(rows: pd.DataFrame, ckpt: Checkpoint, meta: dict, tokens_per_step):
    """The scan rows of one checkpoint with its model, revision, step and tokens in front."""
    found = provenance_of(ckpt, meta, tokens_per_step)
    frame = rows.copy()
    frame.insert(0, "model", found.model)
    frame.insert(1, "revision", found.revision)
    frame.insert(2, "step", pd.array([found.step] * len(frame), dtype="Int64"))
    frame.insert(3, "tokens", pd.array([found.tokens] * len(frame), dtype="Int64"))
    return frame


@dataclass
class Fetched:
    """One checkpoint as read ahead: its weights hash, the digest of its config
    (:func:`~ihprobe.io.sources.config_digest`), its directory (None when its rows are cached
    under its hub revision), its tensors (None when its rows are cached) and its per-tensor
    digests (when known). Its rows are cached under both digests (:attr:`key`)."""

    digest: str
    config: str
    path: Path | None = None
    read: ReadCheckpoint | None = None
    tensors: Digests | None = None

    @property
    def key(self) -> str:
        """What its cache entries are named by: the weights hash and the config's digest."""
        return hashlib.sha256(f"{self.digest}:{self.config}".encode()).hexdigest()


class _Series:
    """The rows of each checkpoint: from this call, the results cache, or ``compute``.

    Hub revisions go through a :class:`~ihprobe.io.hub_cache.RevisionIndex`, so a revision whose
    scan is cached is not fetched; with ``keep="none"`` a fetched revision leaves the HF cache
    once it is scanned. With ``parts`` (metric names) each metric has its own entry; with
    ``records`` an entry holds the rows and the settings ``compute`` returned with them.
    """

    def __init__(
        self,
        directory,
        compute,
        folder: str,
        settings: str,
        keep: str,
        *,
        finite=True,
        parts=None,
        records=False,
    ):
        self.directory, self.compute, self.keep, self.finite = directory, compute, keep, finite
        self.folder, self.settings, self.parts, self.records = folder, settings, parts, records
        self.done: dict[str, pd.DataFrame] = {}  # entry key -> rows, within this call
        self.kept: dict[str, dict] = {}  # entry key -> settings recorded with its rows
        self.indexes: dict[str, RevisionIndex] = {}
        self.present: set = set()  # (source, revision) in the HF cache before the series

    def fetch(self, ckpt: Checkpoint) -> Fetched:
        """What :meth:`rows` needs from disk or the hub (run ahead, in the prefetching thread):
        the weights hash, and the tensors when the rows are not cached."""
        index = self.indexes.get(ckpt.source) if ckpt.revision is not None else None
        digest = index.get(ckpt.revision) if index is not None else None
        config = index.config(ckpt.revision) if index is not None else None
        if digest is not None and config is not None:  # an older entry (no config): fetched
            found = Fetched(digest, config, None, None, digests_of(digest, self.directory))
            if self._known(found.key) is not None:
                return found
        path = fetched(ckpt.source, ckpt.revision)
        config = config_digest(path)
        if not has_safetensors(path):
            return Fetched(weights_hash(path), config, path)
        known = cached_digests(path, self.directory)
        if known is not None and known.whole is not None:
            found = Fetched(known.whole, config, path, None, known)
            if self._known(found.key) is not None:
                check_files(path)  # its rows are cached: checked, not read
                return found
        read = read_checked(path, self.directory)  # files checked, then every tensor read once
        return Fetched(read.weights_hash, config, path, read, read.digests)

    def rows(self, ckpt: Checkpoint, fetched: Fetched) -> tuple:
        """``(weights hash, rows, checkpoint metadata, tensor digests, settings)`` of ``ckpt``;
        its entry and its revision's index are written before the next checkpoint starts."""
        digest, path, read, key = fetched.digest, fetched.path, fetched.read, fetched.key
        index = self.indexes.get(ckpt.source) if ckpt.revision is not None else None
        rows = self._known(key)
        if rows is not None and path is None:  # cached under the revision's recorded hashes
            meta = index.meta(ckpt.revision) if index is not None else {}
            self._settle(ckpt, leftover(ckpt.source, ckpt.revision))  # a killed series' fetch
            return digest, rows, meta, fetched.tensors, self.kept.get(key)
        if rows is None and self.parts is None:
            rows = self.compute(ckpt, read=read)
            if self.records:
                rows, self.kept[key] = rows
            if self.directory is not None and (len(rows) or self.records):  # records: notes
                cache.write(self._file(key), self._entry(key, rows))
        elif rows is None:
            rows = self._by_part(ckpt, key, read)
        self.done[key] = rows
        meta = checkpoint_meta(path)
        if index is not None:
            index.record(ckpt.revision, digest, meta, fetched.config)
        self._settle(ckpt, path)
        return digest, rows, meta, fetched.tensors, self.kept.get(key)

    def _settle(self, ckpt: Checkpoint, path: Path | None) -> None:
        """Done with ``ckpt``: under ``keep="none"`` its revision at ``path`` leaves the HF
        cache when this series downloaded it (recorded), and its fetch is no longer pending."""
        if (
            path is not None
            and self.keep == "none"
            and (ckpt.source, ckpt.revision) not in self.present
        ):
            drop_revision(path)  # this series' download (recorded), nothing else
        if ckpt.revision is not None:
            settled(ckpt.source, ckpt.revision)

    def index(self, ckpt: Checkpoint) -> RevisionIndex | None:
        if ckpt.revision is None:
            return None
        if ckpt.source not in self.indexes:
            self.indexes[ckpt.source] = RevisionIndex(self.directory, ckpt.source)
        return self.indexes[ckpt.source]

    def _file(self, digest: str, part: str | None = None) -> Path:
        name = f"{digest[:32]}-{self.settings}" + (f"-{part}" if part else "")
        return self.directory / self.folder / f"{name}.json"

    def _entry(self, digest: str, rows: pd.DataFrame):
        """The cache entry of ``rows``: the rows, with their settings under ``records``."""
        if self.records:
            return {"rows": as_records(rows), "settings": self.kept[digest]}
        return as_records(rows)

    def _known(self, digest: str, part: str | None = None) -> pd.DataFrame | None:
        """The rows of ``digest`` (of one ``part``) from this call or the cache, else None."""
        if digest in self.done and part is None:
            return self.done[digest]
        if self.directory is None:
            return None
        if self.parts is not None and part is None:  # every part cached, or None
            found = [self._known(digest, name) for name in self.parts]
            return None if any(f is None for f in found) else pd.concat(found, ignore_index=True)
        if self.records:
            entry = cache.read(self._file(digest), lambda v: checked_entry(v, self.finite))
            if entry is None:
                return None
            rows, self.kept[digest] = entry
            return rows
        check = lambda value: checked_rows(value, self.finite)  # noqa: E731
        return cache.read(self._file(digest, part), check)

    def _by_part(self, ckpt: Checkpoint, digest: str, read=None) -> pd.DataFrame:
        """Each part (a metric) from its own cache entry; the missing ones computed together
        (``compute(ckpt, missing)``), so any later call that asks for a subset reuses them. A
        part's entry holds its metric's rows and rows named ``PART.something`` (what computing
        it found besides, e.g. ``fv.clean_accuracy.TASK``)."""
        found = {part: self._known(digest, part) for part in self.parts}
        missing = [part for part, rows in found.items() if rows is None]
        if missing:
            computed = self.compute(ckpt, missing, read=read)
            names = computed["metric"].astype(str)
            for part in missing:
                mine = (names == part) | names.str.startswith(f"{part}.")
                found[part] = computed[mine].reset_index(drop=True)
                if self.directory is not None and len(found[part]):
                    cache.write(self._file(digest, part), as_records(found[part]))
        return pd.concat([found[part] for part in self.parts], ignore_index=True)
