"""Hub checkpoint series streamed through the local HF cache, one revision at a time.

A series such as Pythia's 154 step branches fills a disk when every revision stays cached.
:func:`drop_revision` removes one revision that ihprobe downloaded from the HF cache (its
snapshot, the blobs no other revision uses, the refs that point to it) through
``huggingface_hub``'s cache manager, so a streamed trajectory holds one checkpoint at a time.
Only a download :func:`fetched` made and recorded (``<IHPROBE_CACHE>/hub/downloads.json``), of a
revision the HF cache did not hold when the series started (:func:`cached_before`), is ever
removed: a revision that was in the cache before, or a local path that happens to lie in an HF
cache, stays. A fetch is recorded as pending before it starts (:class:`Fetching`), so the
revision a killed series was fetching stays its download when the series resumes.
:class:`RevisionIndex` remembers, per hub revision, the weights hash its scan was cached under
and the step its ``ihprobe.json`` gave, so that an interrupted series resumes, and a finished
one runs again offline, without fetching the revisions it has already scanned.

>>> path = resolve("EleutherAI/pythia-70m", revision="step1000")   # doctest: +SKIP
>>> drop_revision(path)                                               # doctest: +SKIP
True
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

from ihprobe.core import cache
from ihprobe.core.errors import IhprobeError
from ihprobe.io.sources import resolve

log = logging.getLogger(__name__)

KEEP = ("all", "none")
# held while a revision is fetched into the HF cache and while one is removed from it: a cache
# scan (drop_revision) that meets a download half done (its ref written, its snapshot not yet)
# takes the cache for corrupt, so a prefetching thread's fetch and the loop's removal take turns
CACHE_LOCK = threading.RLock()
HEX64 = re.compile("[0-9a-f]{64}")  # a weights hash (sha256 hex digest)
PROVENANCE = ("run", "step", "tokens")  # what a revision's ihprobe.json gives its scan rows


def check_keep(keep: str) -> str:
    """``keep`` when it is one of :data:`KEEP`; otherwise one line saying what to pass.

    >>> check_keep("none")
    'none'
    """
    if keep not in KEEP:
        raise IhprobeError(f"keep={keep!r} is not one of {', '.join(KEEP)}.")
    return keep


def hub_snapshot(path: Path) -> tuple[Path, str] | None:
    """``(hub cache directory, commit hash)`` when ``path`` is a snapshot in an HF hub cache
    (``<cache>/models--org--name/snapshots/<commit>``), else None (a local directory)."""
    path = Path(path)
    if path.parent.name != "snapshots" or not path.parent.parent.name.startswith("models--"):
        return None
    return path.parents[2], path.name


def drop_revision(path: Path) -> bool:
    """Remove the hub snapshot at ``path`` from the HF cache, when ihprobe downloaded it (as
    recorded by :func:`fetched`): its files, the blobs no other revision shares, and the refs
    that name it. Returns False, removing nothing, for any other path.

    The cache manager of ``huggingface_hub`` does the deleting, so the cache stays consistent
    for other tools.
    """
    found = hub_snapshot(path)
    if found is None:
        return False
    cache, commit = found
    with CACHE_LOCK:
        downloads = Downloads()
        if not downloads.has(path):
            log.info("keeping %s: it was in the HF cache before this series", path)
            return False
        try:
            strategy = scan_cache_dir(cache).delete_revisions(commit)
        except (CacheNotFound, CorruptedCacheException) as err:
            raise IhprobeError(
                f"could not read the HF cache at {cache} to remove {commit} ({err}); check the "
                "cache with `hf cache scan`, or use keep='all'."
            ) from err
        log.info("removing %s from the HF cache (%s)", path, strategy.expected_freed_size_str)
        strategy.execute()
        downloads.forget(path)
    return True


def fetched(source, revision: str | None = None) -> Path:
    """:func:`ihprobe.io.sources.resolve` of ``source`` at ``revision`` while holding
    :data:`CACHE_LOCK` (what a thread that fetches ahead of the loop calls); a hub revision that
    was not in the HF cache before is recorded as ihprobe's download."""
    with CACHE_LOCK:
        local = Path(str(source)).expanduser().exists()
        before = None if local else cached_snapshot(str(source), revision)
        pending = Fetching()
        if not local and before is None:  # recorded before fetching: a kill leaves it ours
            pending.add(source, revision)
        path = resolve(source, revision=revision)
        ours = before is None or pending.has(source, revision)  # or a killed fetch of ours
        if not local and ours and hub_snapshot(path) is not None:
            Downloads().add(path)
        return path


def settled(source, revision: str | None) -> None:
    """A series is done with ``source`` at ``revision`` (computed, and removed under
    ``keep="none"``): its fetch is no longer pending (:class:`Fetching`)."""
    with CACHE_LOCK:
        Fetching().forget(source, revision)


def leftover(source, revision: str | None) -> Path | None:
    """The snapshot of a revision whose fetch was left pending (the series was killed after
    fetching it; :class:`Fetching`), when the HF cache holds it; else None (never fetches)."""
    found = cached_snapshot(str(source), revision) if Fetching().has(source, revision) else None
    return Path(found).parent if found is not None else None


def cached_before(ckpts) -> set[tuple[str, str | None]]:
    """``(source, revision)`` of the hub checkpoints among ``ckpts`` that the HF cache holds
    now, before a series fetches anything: never this series' downloads, so never removed by it.
    """
    pending = Fetching()  # fetched by a series that was killed: its download, not the user's
    return {
        (c.source, c.revision)
        for c in ckpts
        if not Path(str(c.source)).expanduser().exists()
        and cached_snapshot(str(c.source), c.revision) is not None
        and not pending.has(c.source, c.revision)
    }


def cached_snapshot(repo_id: str, revision: str | None) -> str | None:
    """The cached ``config.json`` of ``repo_id`` at ``revision``, or None (never fetches)."""
    try:
        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except (ValueError, OSError):
        return None
    return found if isinstance(found, str) else None


class Downloads:
    """The hub snapshots ihprobe downloaded (their resolved paths), which alone
    :func:`drop_revision` removes; kept in the results cache, so a series that resumes in
    another process still knows them.

    >>> import tempfile
    >>> where, snapshot = tempfile.mkdtemp(), "/hub/models--o--n/snapshots/abc"
    >>> Downloads(where).add(snapshot); Downloads(where).has(snapshot)
    True
    """

    def __init__(self, root: str | os.PathLike | None = None):
        root = cache.root() if root is None else Path(root)
        self.file = root / "hub" / "downloads.json" if root is not None else None
        self.paths: list[str] = cache.read(self.file, _checked_paths) or []

    def has(self, path) -> bool:
        return os.path.realpath(path) in self.paths

    def add(self, path) -> None:
        if not self.has(path) and self.file is not None:
            cache.write(self.file, [*self.paths, os.path.realpath(path)])

    def forget(self, path) -> None:
        if self.has(path) and self.file is not None:
            cache.write(self.file, [p for p in self.paths if p != os.path.realpath(path)])


class Fetching:
    """The hub revisions a series started to fetch while the HF cache lacked them, recorded
    before the fetch and forgotten once the series is done with them (:func:`settled`): a
    revision still listed was fetched by a series that was killed, so it is ihprobe's download
    (:class:`Downloads`) and a resumed ``keep="none"`` series removes it. Kept beside
    :class:`Downloads`.

    >>> import tempfile
    >>> where = tempfile.mkdtemp()
    >>> Fetching(where).add("org/m", "step1"); Fetching(where).has("org/m", "step1")
    True
    """

    def __init__(self, root: str | os.PathLike | None = None):
        root = cache.root() if root is None else Path(root)
        self.file = root / "hub" / "fetching.json" if root is not None else None
        self.entries: list[str] = cache.read(self.file, _checked_names) or []

    @staticmethod
    def _name(source, revision) -> str:
        return f"{source}@{revision}"

    def has(self, source, revision) -> bool:
        return self._name(source, revision) in self.entries

    def add(self, source, revision) -> None:
        if not self.has(source, revision) and self.file is not None:
            cache.write(self.file, [*self.entries, self._name(source, revision)])

    def forget(self, source, revision) -> None:
        if self.has(source, revision) and self.file is not None:
            name = self._name(source, revision)
            cache.write(self.file, [e for e in self.entries if e != name])


class RevisionIndex:
    """Per hub revision, the weights hash its scan is cached under and what its
    ``ihprobe.json`` said of it (run, step, tokens), in a small JSON file.

    A revision scanned before is not fetched again: its scan rows come from the results cache
    under the recorded hash, with the provenance the revision gave them, which also finds
    duplicates without the weights on disk.

    >>> import tempfile
    >>> where = Path(tempfile.mkdtemp())
    >>> RevisionIndex(where, "org/m").record("step2", "a" * 64, {"step": 2, "sha256": {}})
    >>> RevisionIndex(where, "org/m").meta("step2")
    {'step': 2}
    """

    def __init__(self, directory: Path | None, repo_id: str):
        name = repo_id.replace("/", "--")
        # "-3": {revision: {"sha256": weights hash over per-tensor digests, "meta": {...}}},
        # and "config": the digest of its config (sources.config_digest) where recorded
        self.file = directory / "hub" / f"{name}-3.json" if directory is not None else None
        self.entries: dict[str, dict] = cache.read(self.file, _checked_index) or {}

    def get(self, revision: str | None) -> str | None:
        entry = self.entries.get(revision) if revision is not None else None
        return entry["sha256"] if entry is not None else None

    def config(self, revision: str | None) -> str | None:
        """The digest of the revision's config, where recorded (older entries: None)."""
        entry = self.entries.get(revision) if revision is not None else None
        return entry.get("config") if entry is not None else None

    def meta(self, revision: str | None) -> dict:
        """The run, step and tokens the revision's ``ihprobe.json`` gave ({} when none)."""
        entry = self.entries.get(revision) if revision is not None else None
        return dict(entry["meta"]) if entry is not None else {}

    def record(
        self, revision: str | None, digest: str, meta: dict | None = None, config=None
    ) -> None:
        said = {k: (meta or {})[k] for k in PROVENANCE if (meta or {}).get(k) is not None}
        entry = {"sha256": digest, "meta": said, **({"config": config} if config else {})}
        if revision is None or self.file is None or self.entries.get(revision) == entry:
            return
        self.entries[revision] = entry
        cache.write(self.file, self.entries)


def _checked_paths(value) -> list[str]:
    """A list of absolute paths, or ValueError."""
    if not isinstance(value, list) or not all(
        isinstance(p, str) and p.startswith("/") for p in value
    ):
        raise ValueError("not a list of absolute paths")
    return list(value)


def _checked_names(value) -> list[str]:
    """A list of ``source@revision`` names, or ValueError."""
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError("not a list of source@revision names")
    return list(value)


def _checked_index(value) -> dict[str, dict]:
    """A revision index ``{revision: {"sha256", "meta"}}``, or ValueError when any entry is not
    one (a hash that is not a SHA-256, a step or token count that is not a count)."""
    if not isinstance(value, dict):
        raise ValueError("not a {revision: {sha256, meta}} mapping")
    for revision, entry in value.items():
        if not isinstance(entry, dict) or set(entry) - {"config"} != {"sha256", "meta"}:
            raise ValueError(f"{revision!r} maps to {entry!r}, not {{sha256, meta}}")
        digest, meta = entry["sha256"], entry["meta"]
        if any(
            not isinstance(d, str) or not HEX64.fullmatch(d)
            for d in (digest, entry.get("config", digest))
        ):
            raise ValueError(f"{revision!r} maps to {entry!r}: not a SHA-256")
        if not isinstance(meta, dict) or not set(meta) <= set(PROVENANCE):
            raise ValueError(f"{revision!r} records {meta!r}, not its run, step and tokens")
        if not isinstance(meta.get("run", ""), str) or any(
            not isinstance(meta.get(k, 0), int) or isinstance(meta.get(k), bool) or meta[k] < 0
            for k in ("step", "tokens")
            if k in meta
        ):
            raise ValueError(f"{revision!r} records {meta!r}: a run name and counts expected")
    return dict(value)
