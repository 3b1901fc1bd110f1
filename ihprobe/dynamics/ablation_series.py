"""Ablation over training: the load-bearing index and per-head effects at every checkpoint.

Each checkpoint's result is cached under its weights hash and the ablation settings, in the
same cache as :func:`ihprobe.trajectory` (folder ``ablations``), so re-running after new
checkpoints appear ablates only the new ones. The table holds, per checkpoint, the rows of
:meth:`~ihprobe.causal.results.AblationResult.to_frame` (the ranking score of every head --
the signature -- and every statistic of every metric) and, with ``effects``, those of
:meth:`~ihprobe.causal.results.HeadEffects.to_long` (``{metric}.head_change`` per head).

>>> table = ablation_trajectory("runs/demo", scope="global", top=1)          # doctest: +SKIP
>>> load_bearing_figure(table, "ar_accuracy", "prefix_matching")             # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Sequence

import pandas as pd

from ihprobe.causal.ablation import ablate, check_settings, draw_count
from ihprobe.causal.per_head import ROW_DEFAULTS, head_effects
from ihprobe.core import calls
from ihprobe.core.stages import announced_work
from ihprobe.dynamics.trajectories import read_tasks_once
from ihprobe.io import offload
from ihprobe.io.sources import sources_of
from ihprobe.series.cache import cached_map
from ihprobe.series.entries import ROW_COLUMNS, settings_key
from ihprobe.series.estimates import forward_flops, seconds_each

log = logging.getLogger(__name__)

ABLATE_SIGNATURE = inspect.signature(ablate)
EFFECT_SETTINGS = ("metrics", "mode", *ROW_DEFAULTS)  # what head_effects takes beside the model


def ablation_trajectory(
    source_or_sources,
    *,
    revisions: Sequence[str] | None = None,
    tokens_per_step: int | None = None,
    effects: bool = True,
    cache: bool | str | os.PathLike | None = True,
    progress: bool | None = None,
    device: str = "cpu",
    prefetch: int = 1,
    device_map: str | dict | None = None,
    max_memory: dict | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    **ablate_kwargs,
) -> pd.DataFrame:
    """:func:`ihprobe.ablate` (and :func:`ihprobe.head_effects`) at every checkpoint, as one
    long table ordered by training tokens (over 60 lines with this docstring, which names every
    keyword).

    Args:
        source_or_sources: a run directory, checkpoint, hub id (with ``revisions``) or a list.
        revisions, tokens_per_step, cache, device, prefetch: as in :func:`ihprobe.trajectory`.
        progress: a tqdm bar over checkpoints (None, the default: on a terminal only). A
            warning comes before the first checkpoint when a rough estimate (the first
            checkpoint's size times the draws, heads and rows) is minutes, else once the first
            is done when minutes remain.
        effects: also ablate every head alone (``{metric}.head_change`` rows).
        device_map, max_memory, offload_folder: load each checkpoint placed by a device map
            (:func:`ihprobe.load`); each is loaded afresh, none read ahead.
        **ablate_kwargs: passed to :func:`ihprobe.ablate` (``scope``, ``top``, ``baseline``,
            ``mode``, ``metrics``, ...); the per-head effects use the same metrics and rows.

    Returns:
        Columns ``model, revision, step, tokens, layer, head, metric, value, duplicate_of,
        repeats`` (as :func:`ihprobe.trajectory`'s).

    Example:
        >>> table = ablation_trajectory("runs/demo", metrics=["ar_accuracy"], draws=20)
        ... # doctest: +SKIP
        >>> table.query("metric == 'ar_accuracy.load_bearing_index'")[["step", "value"]]
        ... # doctest: +SKIP
    """
    calls.keywords("ablation_trajectory", ablate_kwargs, ablate, tokens_per_step=tokens_per_step)
    bound = ABLATE_SIGNATURE.bind(None, **ablate_kwargs)
    bound.apply_defaults()  # the same settings spelled differently share a cache entry
    settings = {k: v for k, v in bound.arguments.items() if k != "model"}
    # one name in the cache key: draws= and its old name random= share entries
    settings["random"] = draw_count(settings.pop("draws"), settings["random"])
    check_settings(
        **{k: settings[k] for k in ("top", "random", "mode", "metrics", "scope", "baseline")}
    )
    if settings["tasks"] is not None or settings["by"] == "fv":  # files read once, keyed by
        asked = {"tasks": settings["tasks"], "seed": settings["seed"]}  # content, as trajectory
        read, keyed = read_tasks_once(asked)
        settings["tasks"] = keyed["tasks"]
        ablate_kwargs = {**ablate_kwargs, "tasks": read["tasks"]}
    placed = {"device_map": device_map, "max_memory": max_memory, "offload_folder": offload_folder}
    placed = placed if device_map is not None else None
    offload.placement(device_map, max_memory, None)  # refused before any checkpoint is read
    found = sources_of(source_or_sources, revisions)
    each = seconds_each(found, lambda shape: _flops(shape, settings, effects), device)
    with announced_work(log, "ablation_trajectory", len(found), each):
        return cached_map(
            found,
            lambda model: _rows(model, ablate_kwargs, effects),
            "ablations",
            # "global top set without chance heads": entries from before that rule are not reused
            settings_key(["ablation", f"effects={effects}", "top-set=above-chance"], settings),
            placement=placed,
            cache=cache,
            tokens_per_step=tokens_per_step,
            progress=progress,
            device=device,
            prefetch=0 if placed else prefetch,  # a read-ahead would hold a whole checkpoint
            finite=False,  # relative changes and z-scores are NaN or inf by design in places
        )


def _flops(shape: dict, settings: dict, effects: bool) -> float:
    """Rough operations of one checkpoint: the top set, the random draws and (``effects``)
    every head alone, each over the probe rows and the natural-text rows."""
    groups = 1 + settings["random"] + (shape["layers"] * shape["heads"] if effects else 0)
    return forward_flops(shape, settings["batch"] + settings["text_rows"], groups)


def _rows(model, ablate_kwargs: dict, effects: bool) -> pd.DataFrame:
    """``layer, head, metric, value`` of one checkpoint's ablation and per-head effects."""
    parts = [ablate(model, **ablate_kwargs).to_frame()]
    if effects:
        kwargs = {k: v for k, v in ablate_kwargs.items() if k in EFFECT_SETTINGS}
        parts.append(head_effects(model, **kwargs).to_long())
    frame = pd.concat(parts, ignore_index=True)[ROW_COLUMNS]
    # both parts report the clean value of the same rows ({metric}.clean): keep it once
    return frame.drop_duplicates(["layer", "head", "metric"], ignore_index=True)
