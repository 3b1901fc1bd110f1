"""Trajectories: the probe battery over every checkpoint of a run, as one tidy table.

Each checkpoint's scan is cached under its weights hash and the scan settings
(:mod:`ihprobe.series.cache`): re-running after new checkpoints appear scans only the new ones,
and a checkpoint whose weights equal an earlier one's is flagged in the ``duplicate_of`` column.
Every function here is a call of the one loop over checkpoints
(:func:`ihprobe.series.sweep.map_checkpoints`); under ``torchrun --nproc-per-node N`` each rank
scans every N-th checkpoint on its own device, and every rank returns the same table as one
process would.

>>> table = trajectory("runs/demo", metrics=["prefix_matching", "ar_accuracy"])  # doctest: +SKIP
>>> table.query("metric == 'ar_accuracy'")[["step", "tokens", "value"]]          # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Sequence

import pandas as pd
import torch

from ihprobe.causal.ablation import ablate
from ihprobe.causal.results import AblationResult
from ihprobe.causal.tasks import read_tasks, task_digest
from ihprobe.causal.word_tasks import default_tasks_digest
from ihprobe.core import calls
from ihprobe.core.stages import announced_work
from ihprobe.core.threads import DEFAULT_THREADS
from ihprobe.core.world import resolve_device
from ihprobe.io import offload
from ihprobe.io import provenance as io_provenance
from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import sources_of
from ihprobe.probes.battery import scan
from ihprobe.probes.metrics import check_metrics
from ihprobe.probes.scores import HeadScores
from ihprobe.series.cache import Swept, cached_checkpoints, cached_map
from ihprobe.series.checkpoint_rows import Loaded
from ihprobe.series.entries import ROW_COLUMNS, settings_key
from ihprobe.series.estimates import forward_flops, seconds_each
from ihprobe.series.sweep import map_checkpoints

log = logging.getLogger(__name__)
FV_ACCURACY = "fv.clean_accuracy."  # + a task's name: its clean accuracy, beside fv's rows
SCAN_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(scan).parameters.items()
    if p.default is not inspect.Parameter.empty and name != "metrics"
}


def scan_checkpoints(
    ckpts: Sequence[Checkpoint],
    metrics: Sequence[str] | None = None,
    *,
    progress: bool | None = False,
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    keep: str = "all",
    placement: dict | None = None,
    cache: bool | str | os.PathLike | None = True,
    **scan_kwargs,
) -> list[tuple[HeadScores, str | None, str | None]]:
    """:func:`ihprobe.scan` of every checkpoint, each with the earlier checkpoint of identical
    weights (or None) and, when only some of its tensors or shards repeat earlier checkpoints',
    which (:meth:`~ihprobe.series.repeats.Repeat.describe`, or None). Sharded under torchrun.

    Each checkpoint's scores are recorded in the results cache (``cache``: True for the
    default one, a path, or False; :mod:`ihprobe.series.cache`) as soon as it is scanned,
    under its weights hash and everything else that changes them (the metrics, the probe
    settings, ``dtype``, the device type and ``placement``): a rerun, or a series that was
    interrupted, takes them from there without loading or fetching the checkpoint (offline
    too), and a changed setting scans again. With ``keep="none"`` each hub revision this
    series downloads leaves the HF cache once it is scanned (as in :func:`trajectory`).
    ``placement``: the device map each checkpoint is loaded under
    (:func:`ihprobe.series.sweep.each_model`).

    Example:
        >>> [s.step for s, *_ in scan_checkpoints(checkpoints("runs/demo"))]  # doctest: +SKIP
    """
    wanted = check_metrics(metrics)
    kind = resolve_device(device).type  # auto: cuda when available
    scan_kwargs, keyed = read_tasks_once(scan_kwargs, builtin="fv" in wanted)
    settings = {**SCAN_DEFAULTS, **keyed, "metrics": wanted, "device": kind}
    settings.update(dtype=str(dtype).removeprefix("torch."), placement=placement)

    def scan_rows(model) -> tuple[pd.DataFrame, dict]:
        scores = scan(model, wanted, **scan_kwargs)
        kept = json.loads(json.dumps(scores.settings, default=str))  # as the cache keeps it
        return scores.to_frame(), kept

    swept = cached_checkpoints(
        ckpts,
        lambda on: Loaded(scan_rows, on, placement, dtype),
        "scans",
        settings_key(["scan-series"], settings),  # never the entries of another setting
        records=True,
        cache=cache,
        progress=progress,
        desc="scan",
        device=device,
        keep=keep,
        threads=None,  # torch's own setting, as a scan of one model
        prefetch=0 if placement else 1,  # a read-ahead would hold a whole checkpoint
    )
    return [(_scores(done), done.duplicate_of, done.repeats) for done in swept]


def read_tasks_once(scan_kwargs: dict, builtin: bool = True) -> tuple[dict, dict]:
    """``scan_kwargs`` with ``fv``'s task files read once, and what the cache keys them by: each
    task's name and pairs (:func:`~ihprobe.causal.tasks.task_digest`), never a file's path, so
    an edited task file is scanned again and the tasks scanned are the ones keyed. No tasks
    (``builtin``: where the built-in set is used) are keyed by the built-in set's digest
    (:func:`~ihprobe.causal.word_tasks.default_tasks_digest`: WordNet's two tasks or not).

    >>> read_tasks_once({"seed": 1}, builtin=False)
    ({'seed': 1}, {'seed': 1})
    """
    if scan_kwargs.get("tasks") is None:
        if not builtin:
            return scan_kwargs, scan_kwargs
        seed = scan_kwargs.get("seed", SCAN_DEFAULTS["seed"])
        return scan_kwargs, {**scan_kwargs, "tasks": default_tasks_digest(seed=seed)}
    tasks = read_tasks(scan_kwargs["tasks"])
    keyed = [task_digest(task) for task in tasks]
    return {**scan_kwargs, "tasks": tasks}, {**scan_kwargs, "tasks": keyed}


def scan_rows(model, metrics: list[str], scan_kwargs: dict) -> pd.DataFrame:
    """The scan's rows of ``metrics``; where ``fv`` was asked for and its tasks ran, each
    task's clean accuracy as a model row ``fv.clean_accuracy.TASK``, part of ``fv``'s cache
    entry: a checkpoint that does no task above chance (no ``fv`` rows) is then cached too,
    with the accuracies that say so, and a rerun reads it.

    Example:
        >>> scan_rows(model, ["fv"], {"tasks": [task]}).metric.tolist()[-1]  # doctest: +SKIP
        'fv.clean_accuracy.antonym'
    """
    scores = scan(model, metrics, **scan_kwargs)
    frame = scores.to_frame()
    accuracy = scores.settings.get("fv_accuracy") if "fv" in metrics else None
    if not accuracy:
        return frame
    rows = pd.DataFrame(
        {
            "layer": pd.array([None] * len(accuracy), dtype="Int64"),
            "head": pd.array([None] * len(accuracy), dtype="Int64"),
            "metric": [f"{FV_ACCURACY}{name}" for name in accuracy],
            "value": [float(v) for v in accuracy.values()],
        }
    )
    return pd.concat([frame[ROW_COLUMNS], rows], ignore_index=True)


def _scores(done: Swept) -> HeadScores:
    """The scores of one checkpoint from its rows and the settings recorded with them: the same
    whether just computed or read from the cache."""
    settings = dict(done.settings or {})
    if done.rows.empty:
        return HeadScores({}, {}, done.provenance, settings)
    scores = HeadScores.from_frame(io_provenance.with_provenance(done.rows, done.provenance))
    scores.model = {name: float(value) for name, value in scores.model.items()}
    scores.settings = settings
    return scores


def ablate_checkpoints(
    ckpts: Sequence[Checkpoint],
    *,
    progress: bool | None = False,
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    placement: dict | None = None,
    **ablate_kwargs,
) -> list[AblationResult]:
    """:func:`ihprobe.ablate` of every checkpoint, in order, on ``device`` in ``dtype``, or
    each loaded afresh under a device map, ``placement`` (``device_map``, ``max_memory``,
    ``offload_folder`` of :func:`ihprobe.load`), as in :func:`scan_checkpoints`.

    Example:
        >>> [r.step for r in ablate_checkpoints(checkpoints("runs/demo"), top=1)]  # doctest: +SKIP
    """
    where = {"progress": progress, "desc": "ablate", "device": device, "dtype": dtype}
    where["placement"] = placement
    swept = map_checkpoints(ckpts, lambda _, model: ablate(model, **ablate_kwargs), **where)
    return [result for _, result in swept]


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
    prefetch: int = 1,
    device_map: str | dict | None = None,
    max_memory: dict | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    **scan_kwargs,
) -> pd.DataFrame:
    """Scan every checkpoint and return one long table ordered by training tokens (over 60
    lines with this docstring, which names every keyword).

    Args:
        source_or_sources: a run directory, a checkpoint directory, a hub id (with
            ``revisions``), or a list of these or of :class:`~ihprobe.io.runs.Checkpoint`.
        metrics: scan metrics (see ``ihprobe.probes.battery.METRICS``); None for all.
        revisions: hub revisions to sweep, e.g. ``[f"step{s}" for s in (0, 512, 1000)]``.
        tokens_per_step: B*C: tokens = step * tokens_per_step where checkpoints do not say.
        cache: True for the default cache directory, a path, or False for none.
        progress: a tqdm bar over checkpoints (on by default; None: only on a terminal); a
            warning before the first when a rough estimate of the whole is minutes.
        device: where models are loaded; under torchrun ``cuda`` means each rank's own GPU.
        keep: ``"all"`` leaves fetched hub revisions in the HF cache; ``"none"`` removes each
            one from the HF cache once it is scanned, before the next is fetched (hundreds of
            checkpoints would fill a disk). A revision scanned before is not fetched again:
            an interrupted series resumes from the results cache.
        threads: torch's CPU threads for the sweep (``ihprobe.core.threads``: one gives the
            most checkpoints per CPU-second on small models); None leaves torch's setting.
        prefetch: checkpoints read ahead while one is scanned (0: none; the same table).
        device_map, max_memory, offload_folder: load each checkpoint placed by a device map
            (:func:`ihprobe.load`); each is loaded afresh, none read ahead.
        **scan_kwargs: passed to :func:`ihprobe.scan` (``n``, ``batch``, ``seed``, ``bos``...).

    Returns:
        The ``scan`` columns ``model, revision, step, tokens, layer, head, metric, value``,
        ``duplicate_of`` (an earlier checkpoint of identical weights) and ``repeats`` (shards or
        tensors that repeat an earlier one's). Under torchrun every rank returns the whole table.

    Example:
        >>> table = trajectory("EleutherAI/pythia-70m", ["prefix_matching"],   # doctest: +SKIP
        ...     revisions=["step0", "step1000", "step2000"], tokens_per_step=2_097_152)
    """
    calls.keywords("trajectory", scan_kwargs, scan, tokens_per_step=tokens_per_step)
    scan_kwargs, keyed = read_tasks_once(scan_kwargs)
    settings = {**SCAN_DEFAULTS, **keyed}  # spelled out or left default: one entry
    wanted = [m for m in check_metrics(metrics) if m != "icl_score" or settings["text"] is not None]
    placed = {"device_map": device_map, "max_memory": max_memory, "offload_folder": offload_folder}
    placed = placed if device_map is not None else None
    offload.placement(device_map, max_memory, None)  # refused before any checkpoint is read
    found = sources_of(source_or_sources, revisions)
    each = seconds_each(found, lambda shape: forward_flops(shape, settings["batch"], 3), device)
    with announced_work(log, "trajectory", len(found), each):  # 3 passes: scan_rows's probes
        return cached_map(
            found,
            lambda model, missing: scan_rows(model, missing, scan_kwargs),
            "scans",
            settings_key(None, settings),  # each metric is its own entry (parts)
            parts=wanted,
            placement=placed,
            threads=threads,
            prefetch=0 if placed else prefetch,  # a read-ahead would hold a whole checkpoint
            cache=cache,
            tokens_per_step=tokens_per_step,
            progress=progress,
            device=device,
            keep=keep,
        )
