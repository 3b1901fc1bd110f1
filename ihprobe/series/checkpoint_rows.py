"""One checkpoint's rows in a series (:mod:`ihprobe.series.cache`): read ahead
(:class:`Fetched`: its weights hash, config digest and tensors), then taken from this call, the
results cache (entries named by both digests, checked when read: :mod:`ihprobe.series.entries`)
or computed by :class:`Loaded` (one model re-filled with each checkpoint's weights).

>>> Fetched("ab" * 32, "cd" * 32).key == Fetched("ab" * 32, "ef" * 32).key
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from ihprobe.core import cache
from ihprobe.io.hub_cache import RevisionIndex, drop_revision, fetched, leftover, settled
from ihprobe.io.runs import Checkpoint, checkpoint_meta
from ihprobe.io.sources import config_digest
from ihprobe.io.swap import load_or_swap
from ihprobe.io.tensor_reads import Digests, ReadCheckpoint, cached_digests, digests_of
from ihprobe.io.weights import check_files, has_safetensors, read_checked, weights_hash
from ihprobe.series.entries import ROW_COLUMNS, as_records, checked_entry, checked_rows


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


class SeriesRows:
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
