"""The results cache over training: each checkpoint's rows (``layer, head, metric, value``)
cached under its weights hash, its config and the settings that change them, in
``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``. Re-running after new checkpoints appear computes only
the new ones, and a checkpoint whose weights equal an earlier one's is flagged in
``duplicate_of`` (published series sometimes save one state under two steps). Hub revisions
whose rows are cached are not fetched again; with ``keep="none"`` each fetched revision leaves
the HF cache once computed.
Each checkpoint's entry is written (atomically) as soon as it is computed, so a series that is
interrupted resumes from the next checkpoint, and a finished one runs again offline. How one
checkpoint's rows are read ahead, found in the cache or computed is
:mod:`ihprobe.series.checkpoint_rows`.

>>> provenance_of(Checkpoint("runs/demo", None, 8), {"tokens": 512}).tokens
512
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass

import pandas as pd
import torch

from ihprobe.core.cache import root as cache_root
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.io.hub_cache import cached_before, check_keep
from ihprobe.io.provenance import Provenance
from ihprobe.io.runs import Checkpoint
from ihprobe.series.checkpoint_rows import Loaded, SeriesRows
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
    every keyword). A cached entry is used only when it passes its check
    (:func:`~ihprobe.series.entries.checked_rows`; ``finite``: every value finite), else it is
    computed again.
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
        series = SeriesRows(where, compute, folder, settings, keep, **options)
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
