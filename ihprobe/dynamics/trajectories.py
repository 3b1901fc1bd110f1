"""Trajectories: the probe battery over every checkpoint of a run, as one tidy table.

Each checkpoint's scan is cached under its weights hash (and the scan settings), in
``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``: re-running after new checkpoints appear scans only
the new ones, and a checkpoint whose weights equal an earlier one's is flagged in the
``duplicate_of`` column (published series sometimes save one state under two steps).

:func:`each_model` is the checkpoint sweep every command shares: it loads the first checkpoint
and swaps the weights of the next ones into the same model.

Under ``torchrun --nproc-per-node N`` :func:`scan_checkpoints` and :func:`trajectory` share the
checkpoints out over the ranks (:mod:`ihprobe.dynamics.shard`): each rank scans every N-th
checkpoint in
its own skeleton on its own device, and every rank returns the same table as one process would.

>>> table = trajectory("runs/demo", metrics=["prefix_matching", "ar_accuracy"])  # doctest: +SKIP
>>> table.query("metric == 'ar_accuracy'")[["step", "tokens", "value"]]          # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Iterator, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from ihprobe.causal.ablation import AblationResult, ablate
from ihprobe.core import checks
from ihprobe.core.cache import root as cache_root
from ihprobe.core.stages import Counter
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.dynamics.series_cache import (  # noqa: F401 - checked_rows: the cache's reader
    ROW_COLUMNS,
    Series,
    checked_rows,
    settings_key,
)
from ihprobe.dynamics.shard import each_share
from ihprobe.io.hub_cache import check_keep, drop_revision
from ihprobe.io.models import fill_provenance, load_or_swap
from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import resolve, sources_of
from ihprobe.io.weights import weights_hash
from ihprobe.probes.battery import check_metrics, scan
from ihprobe.probes.scores import HeadScores

log = logging.getLogger(__name__)

SCAN_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(scan).parameters.items()
    if p.default is not inspect.Parameter.empty and name != "metrics"
}


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
    model, counter = None, Counter(log, desc, len(ckpts))
    bar = tqdm(ckpts, desc=desc, unit="ckpt", disable=None if progress is None else not progress)
    for index, ckpt in enumerate(bar, 1):
        bar.set_postfix_str(ckpt.label)
        counter.start(index, ckpt.label)
        where = {"revision": ckpt.revision, "device": device, "dtype": dtype}
        model = load_or_swap(model, ckpt.source, **where)
        fill_provenance(model, step=ckpt.step, tokens=ckpt.tokens)
        yield ckpt, model


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


def scan_checkpoints(
    ckpts: Sequence[Checkpoint],
    metrics: Sequence[str] | None = None,
    *,
    progress: bool | None = False,
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    keep: str = "all",
    **scan_kwargs,
) -> list[tuple[HeadScores, str | None]]:
    """:func:`ihprobe.scan` of every checkpoint, each with the earlier checkpoint of identical
    weights (or None) when there is more than one checkpoint. Sharded under torchrun. With
    ``keep="none"`` each hub revision leaves the HF cache once it is scanned (as in
    :func:`trajectory`).

    Example:
        >>> [s.step for s, _ in scan_checkpoints(checkpoints("runs/demo"))]   # doctest: +SKIP
    """

    keep = check_keep(keep)

    def scan_share(share: list[Checkpoint], world) -> list[tuple[HeadScores, str | None]]:
        bars = progress if world.main else False
        swept = each_model(share, progress=bars, desc="scan", device=world.device, dtype=dtype)
        out = []
        for ckpt, model in swept:
            out.append(
                (scan(model, metrics, **scan_kwargs), _hash(ckpt) if len(ckpts) > 1 else None)
            )
            if keep == "none":
                drop_revision(resolve(ckpt.source, revision=ckpt.revision))
        return out

    duplicates = Duplicates()
    return [
        (scores, duplicates.check(ckpt, digest) if digest else None)
        for ckpt, (scores, digest) in zip(ckpts, each_share(scan_share, ckpts, device), strict=True)
    ]


def ablate_checkpoints(
    ckpts: Sequence[Checkpoint],
    *,
    progress: bool | None = False,
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    **ablate_kwargs,
) -> list[AblationResult]:
    """:func:`ihprobe.ablate` of every checkpoint, in order, on ``device`` in ``dtype``."""
    swept = each_model(ckpts, progress=progress, desc="ablate", device=device, dtype=dtype)
    return [ablate(model, **ablate_kwargs) for _, model in swept]


def _hash(ckpt: Checkpoint) -> str:
    return weights_hash(resolve(ckpt.source, revision=ckpt.revision))


def trajectory(
    source_or_sources,
    metrics: Sequence[str] | None = None,
    *,
    revisions: Sequence[str] | None = None,
    tokens_per_step: int | None = None,
    cache: bool | str | os.PathLike | None = True,
    progress: bool | None = True,
    device: str = "cpu",
    keep: str = "all",
    threads: int | None = DEFAULT_THREADS,
    **scan_kwargs,
) -> pd.DataFrame:
    """Scan every checkpoint and return one long table ordered by training tokens.

    Args:
        source_or_sources: a run directory, a checkpoint directory, a hub id (with
            ``revisions``), or a list of these or of :class:`~ihprobe.io.runs.Checkpoint`.
        metrics: scan metrics (see ``ihprobe.probes.battery.METRICS``); None for all.
        revisions: hub revisions to sweep, e.g. ``[f"step{s}" for s in (0, 512, 1000)]``.
        tokens_per_step: B*C, to fill ``tokens`` where the checkpoints do not record it
            (hub revisions): tokens = step * tokens_per_step.
        cache: True for the default cache directory, a path, or False for none.
        progress: a tqdm bar over checkpoints (on by default; None: only on a terminal).
        device: where models are loaded; under torchrun ``cuda`` means each rank's own GPU.
        keep: ``"all"`` leaves fetched hub revisions in the HF cache; ``"none"`` removes each
            one from the HF cache once it is scanned, before the next is fetched (hundreds of
            checkpoints would fill a disk). A revision scanned before is not fetched again:
            an interrupted series resumes from the results cache.
        threads: torch's CPU threads for the sweep (``ihprobe.core.threads``: one gives the
            most checkpoints per CPU-second on small models); None leaves torch's setting.
        **scan_kwargs: passed to :func:`ihprobe.scan` (``n``, ``batch``, ``seed``, ``bos``...).

    Returns:
        The ``scan`` columns ``model, revision, step, tokens, layer, head, metric, value``
        plus ``duplicate_of``: the earlier checkpoint with identical weights, or None. Under
        torchrun each rank scans (and caches) its share and every rank returns the whole table.

    Example:
        >>> table = trajectory("EleutherAI/pythia-70m", ["prefix_matching"],   # doctest: +SKIP
        ...     revisions=["step0", "step1000", "step2000"], tokens_per_step=2_097_152)
    """
    checks.keywords("trajectory", scan_kwargs, scan, tokens_per_step=tokens_per_step)
    settings = {**SCAN_DEFAULTS, **scan_kwargs}  # spelled out or left default: one entry
    wanted = [m for m in check_metrics(metrics) if m != "icl_score" or settings["text"] is not None]
    return cached_sweep(
        sources_of(source_or_sources, revisions),
        lambda where: _Scanner(scan_kwargs, where).scan,
        "scans",
        settings_key(None, settings),
        parts=wanted,
        threads=threads,
        cache=cache,
        tokens_per_step=tokens_per_step,
        progress=progress,
        device=device,
        keep=keep,
    )


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
) -> pd.DataFrame:
    """``compute(ckpt)`` (rows ``layer, head, metric, value``) of every checkpoint, cached in
    ``cache/folder`` under the weights hash and ``settings``, as one long table ordered by
    tokens, with provenance and ``duplicate_of`` (used by :func:`trajectory` and
    :func:`ihprobe.ablation_trajectory`). A cached entry is used only when it passes
    :func:`checked_rows` (``finite``: every value finite); otherwise it is computed again.
    ``make_compute(device)`` builds the function once per process; under torchrun each rank
    computes every N-th checkpoint (:mod:`ihprobe.dynamics.shard`) and every rank gets the whole
    table. ``keep="none"`` streams hub revisions (see :func:`trajectory`). With ``parts`` (metric
    names) each metric is cached on its own and ``compute(ckpt, missing)`` computes the missing
    ones (:class:`~ihprobe.dynamics.series_cache.Series`). The sweep runs with ``threads`` torch
    threads (None: torch's setting)."""
    keep = check_keep(keep)

    def share_rows(share: list[Checkpoint], world) -> list[tuple[str, pd.DataFrame, dict]]:
        """(weights hash, rows, checkpoint meta) of each checkpoint of this rank's share."""
        where = cache_root(cache)
        series = Series(where, make_compute(world.device), folder, settings, keep, finite, parts)
        bar = None if progress is None else not (progress and world.main)
        found, counter = [], Counter(log, folder, len(share))
        for index, ckpt in enumerate(tqdm(share, disable=bar), 1):
            counter.start(index, ckpt.label)
            found.append(series.rows(ckpt))
        return found

    duplicates = Duplicates()
    frames = []
    with torch_threads(threads):
        found = each_share(share_rows, ckpts, device)
    for ckpt, (digest, rows, meta) in zip(ckpts, found, strict=True):
        frames.append(_with_provenance(rows, ckpt, meta, tokens_per_step))
        frames[-1]["duplicate_of"] = duplicates.check(ckpt, digest)
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def _with_provenance(rows: pd.DataFrame, ckpt: Checkpoint, meta: dict, tokens_per_step):
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


class _Scanner:
    """Scans checkpoints, loading the first and swapping later weights into the same model."""

    def __init__(self, scan_kwargs: dict, device: torch.device):
        self.model, self.scan_kwargs, self.device = None, scan_kwargs, device

    def scan(self, ckpt: Checkpoint, metrics: list[str]) -> pd.DataFrame:
        self.model = load_or_swap(
            self.model, ckpt.source, revision=ckpt.revision, device=self.device
        )
        frame = scan(self.model, metrics, **self.scan_kwargs).to_frame()
        return frame[ROW_COLUMNS].reset_index(drop=True)
