"""Ablation over training: the load-bearing index and per-head effects at every checkpoint.

Each checkpoint's result is cached under its weights hash and the ablation settings, in the
same cache as :func:`ihprobe.trajectory` (folder ``ablations``), so re-running after new
checkpoints appear ablates only the new ones. The table holds, per checkpoint, the rows of
:meth:`~ihprobe.ablation_result.AblationResult.to_frame` (the ranking score of every head --
the signature -- and every statistic of every metric) and, with ``effects``, those of
:meth:`~ihprobe.ablation_result.HeadEffects.to_long` (``{metric}.head_change`` per head).

>>> table = ablation_trajectory("runs/demo", scope="global", top=1)          # doctest: +SKIP
>>> load_bearing_figure(table, "ar_accuracy", "prefix_matching")             # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence

import pandas as pd
from tqdm.auto import tqdm

from ihprobe.ablation import ablate, check_settings, head_effects
from ihprobe.models import checkpoint_meta, load_or_swap, resolve, weights_hash
from ihprobe.trajectories import _read, _settings_key, _write, cache_dir, sources_of

ABLATE_SIGNATURE = inspect.signature(ablate)
EFFECT_SETTINGS = ("metrics", "mode", "seed", "n", "batch", "bos", "text", "text_rows", "tasks")


def ablation_trajectory(
    source_or_sources,
    *,
    revisions: Sequence[str] | None = None,
    tokens_per_step: int | None = None,
    effects: bool = True,
    cache: bool | str | os.PathLike | None = True,
    progress: bool = False,
    **ablate_kwargs,
) -> pd.DataFrame:
    """:func:`ihprobe.ablate` (and :func:`ihprobe.head_effects`) at every checkpoint, as one
    long table ordered by training tokens.

    Args:
        source_or_sources: a run directory, checkpoint, hub id (with ``revisions``) or a list.
        revisions, tokens_per_step, cache, progress: as in :func:`ihprobe.trajectory`.
        effects: also ablate every head alone (``{metric}.head_change`` rows).
        **ablate_kwargs: passed to :func:`ihprobe.ablate` (``scope``, ``top``, ``baseline``,
            ``mode``, ``metrics``, ...); the per-head effects use the same metrics and rows.

    Returns:
        Columns ``model, revision, step, tokens, layer, head, metric, value, duplicate_of``.

    Example:
        >>> table = ablation_trajectory("runs/demo", metrics=["ar_accuracy"], random=20)
        ... # doctest: +SKIP
        >>> table.query("metric == 'ar_accuracy.load_bearing_index'")[["step", "value"]]
        ... # doctest: +SKIP
    """
    check_settings(
        top=ablate_kwargs.get("top", 0.02),
        random=ablate_kwargs.get("random", 20),
        mode=ablate_kwargs.get("mode", "mean"),
        metrics=ablate_kwargs.get("metrics"),
        scope=ablate_kwargs.get("scope", "layer"),
        baseline=ablate_kwargs.get("baseline", "layer-matched"),
    )
    directory = cache_dir(cache)
    bound = ABLATE_SIGNATURE.bind(None, **ablate_kwargs)
    bound.apply_defaults()  # the same settings spelled differently share a cache entry
    settings = _settings_key(["ablation", f"effects={effects}"], bound.arguments | {"model": None})
    seen: dict[str, str] = {}  # weights hash -> the first checkpoint with those weights
    done: dict[str, pd.DataFrame] = {}
    model, frames = None, []
    for ckpt in tqdm(sources_of(source_or_sources, revisions), disable=not progress):
        path = resolve(ckpt.source, revision=ckpt.revision)
        digest = weights_hash(path)
        duplicate = seen.get(digest)
        seen.setdefault(digest, ckpt.label)
        file = directory / "ablations" / f"{digest[:32]}-{settings}.json" if directory else None
        rows = done.get(digest)
        if rows is None and file is not None:
            rows = _read(file)
        if rows is None:
            model = load_or_swap(model, ckpt.source, revision=ckpt.revision)
            rows = _checkpoint_rows(model, effects, ablate_kwargs)
            if file is not None:
                _write(file, rows)
        done[digest] = rows
        frames.append(_with_checkpoint(rows, ckpt, checkpoint_meta(path), tokens_per_step))
        frames[-1]["duplicate_of"] = duplicate
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def _checkpoint_rows(model, effects: bool, ablate_kwargs: dict) -> pd.DataFrame:
    """``layer, head, metric, value`` of one checkpoint's ablation (and per-head effects)."""
    parts = [ablate(model, **ablate_kwargs).to_frame()]
    if effects:
        kwargs = {k: v for k, v in ablate_kwargs.items() if k in EFFECT_SETTINGS}
        parts.append(head_effects(model, **kwargs).to_long())
    frame = pd.concat(parts, ignore_index=True)
    return frame[["layer", "head", "metric", "value"]]


def _with_checkpoint(rows: pd.DataFrame, ckpt, meta: dict, tokens_per_step) -> pd.DataFrame:
    """The rows with the checkpoint's run name, revision, step and tokens in front."""
    step = ckpt.step if ckpt.step is not None else meta.get("step")
    tokens = ckpt.tokens if ckpt.tokens is not None else meta.get("tokens")
    if tokens is None and tokens_per_step and step is not None:
        tokens = step * tokens_per_step
    frame = rows.copy()
    frame.insert(0, "model", str(meta.get("run") or ckpt.source))
    frame.insert(1, "revision", ckpt.revision)
    frame.insert(2, "step", pd.array([step] * len(frame), dtype="Int64"))
    frame.insert(3, "tokens", pd.array([tokens] * len(frame), dtype="Int64"))
    return frame
