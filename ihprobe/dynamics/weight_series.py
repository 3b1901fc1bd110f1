"""Weight-only metrics over training, reading only the tensors they use.

OV copying and Q/K/V composition need the embeddings and the attention weights, never the MLPs
or the norms. :func:`weight_trajectory` reads, per checkpoint, only the named tensors its metrics
use (:class:`~ihprobe.io.head_weights.HeadWeights`: ``safe_open`` of those tensors, never whole
files), in a background thread one checkpoint ahead (:mod:`ihprobe.series.prefetch`), and
caches each checkpoint's rows under the SHA-256 of the tensors read: a re-run whose tensor
digests are remembered reads nothing. No model is built.

Each metric is one row of :data:`WEIGHT_METRICS`: the weights it reads and how it scores.

>>> sorted(WEIGHT_METRICS)
['copying', 'k_composition_max', 'q_composition_max', 'v_composition_max']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass

import pandas as pd
import torch

from ihprobe import __version__
from ihprobe.core import cache as entries
from ihprobe.core import calls, checks
from ihprobe.core.cache import root as cache_root
from ihprobe.core.errors import IhprobeError
from ihprobe.io.head_weights import HeadWeights
from ihprobe.io.hub_cache import fetched
from ihprobe.io.runs import Checkpoint, checkpoint_meta
from ihprobe.io.sources import sources_of
from ihprobe.io.tensor_reads import cached_digests, whole_digest
from ihprobe.io.validation import check_checkpoint
from ihprobe.io.weights import weight_files
from ihprobe.probes.composition import BASELINE_DRAWS, composition
from ihprobe.probes.copying import copying_scores
from ihprobe.series.cache import with_provenance
from ihprobe.series.entries import ROW_COLUMNS, checked_rows
from ihprobe.series.prefetch import prefetched
from ihprobe.series.repeats import Duplicates, Repeats, series_label
from ihprobe.series.sweep import checkpoint_bytes, walk

FOLDER = "weights"  # results cache folder


def strongest_composition(weights, kind: str, draws: int) -> torch.Tensor:
    """Per receiving head, its strongest ``kind``-composition (minus the random baseline) from
    any head of an earlier layer; NaN in layer 0."""
    values = composition(weights, kind, draws=draws).values  # [l1, h1, l2, h2]
    best = values.nan_to_num(-torch.inf).flatten(0, 1).max(0).values
    return best.where(best > -torch.inf, torch.tensor(torch.nan, device=best.device))


@dataclass(frozen=True)
class WeightMetric:
    """A per-head score computed from weights alone."""

    reads: tuple[str, ...]  # the weights it uses (of HeadWeights' W_E ... W_O)
    score: Callable[[HeadWeights, int], torch.Tensor]  # (weights, draws) -> [layer, head]


_ATTENTION = ("W_Q", "W_K", "W_V", "W_O")
WEIGHT_METRICS: dict[str, WeightMetric] = {
    "copying": WeightMetric(("W_E", "W_U", "W_V", "W_O"), lambda w, d: copying_scores(w)),
    **{
        f"{kind}_composition_max": WeightMetric(
            _ATTENTION, lambda w, d, kind=kind: strongest_composition(w, kind, d)
        )
        for kind in ("q", "k", "v")
    },
}


def weight_trajectory(
    source_or_sources,
    metrics: Sequence[str] = ("copying",),
    *,
    revisions: Sequence[str] | None = None,
    tokens_per_step: int | None = None,
    cache: bool | str | os.PathLike | None = True,
    progress: bool | None = False,
    prefetch: int = 1,
    draws: int = BASELINE_DRAWS,
) -> pd.DataFrame:
    """Weight-only metrics (:data:`WEIGHT_METRICS`) at every checkpoint, as one long table
    (over 60 lines: the fetch run ahead is a closure over the call's settings and cache).

    Args:
        source_or_sources: a run directory, a checkpoint, a hub id with ``revisions``, or a list
            of these or of :class:`~ihprobe.io.runs.Checkpoint` (e.g. from
            :func:`ihprobe.io.suites.suite_checkpoints`).
        metrics: names of :data:`WEIGHT_METRICS`.
        revisions, tokens_per_step, cache, progress: as in :func:`ihprobe.trajectory`.
        prefetch: checkpoints read ahead in a background thread (0: none).
        draws: random-matrix draws of the composition baseline.

    Returns:
        ``model, revision, step, tokens, layer, head, metric, value, duplicate_of, repeats``,
        where ``duplicate_of`` names an earlier checkpoint whose tensors read here are identical
        and ``repeats`` the tensors that repeat an earlier checkpoint's when only some do (whole
        shards only where every tensor's digest is known: a checkpoint read whole before).

    Only the named tensors of safetensors checkpoints are read, each checked finite; the files
    and the config are checked as for loading (regular files, sound headers, config schema), but
    checksums recorded for whole files are not, since that would read every byte.

    Example:
        >>> weight_trajectory("EleutherAI/pythia-160m", ["copying"],          # doctest: +SKIP
        ...     revisions=["step0", "step1000"], tokens_per_step=2_097_152)
    """
    metrics = list(checks.sequence("metrics", metrics))
    unknown = [m for m in metrics if m not in WEIGHT_METRICS]
    if unknown or not metrics:
        raise IhprobeError(
            f"{unknown[0] if unknown else 'no metric'} is not a weight-only metric; they are "
            f"{', '.join(WEIGHT_METRICS)}."
        )
    calls.arguments(draws=draws)
    ckpts = sources_of(source_or_sources, revisions)
    needed = tuple(dict.fromkeys(w for m in metrics for w in WEIGHT_METRICS[m].reads))
    where = cache_root(cache)
    settings = entries.key({"version": __version__, "metrics": metrics, "draws": draws})

    def entry(digest: str):
        return where / FOLDER / f"{digest[:32]}-{settings}.json" if where is not None else None

    def fetch(ckpt: Checkpoint):
        """(digest, rows if cached or weights if read, path, tensor digests): run ahead in the
        prefetching thread."""
        path = fetched(ckpt.source, ckpt.revision)
        check_checkpoint(path, weight_files(path), finite=False)  # each tensor read is checked
        weights = HeadWeights(path, where if where is not None else False)
        names = sorted({n for w in needed for n in weights.names(w)})
        known = cached_digests(path, where if where is not None else False)
        if known is not None and all(n in known.tensors for n in names):
            digest = whole_digest({n: known.tensors[n] for n in names})
            rows = entries.read(entry(digest), checked_rows_any)
            if rows is not None:
                return digest, rows, path, known
        weights.load(needed)
        whole = known is not None and known.whole is not None  # every tensor's digest known
        return weights.digest, weights, path, known if whole else weights.reader.digests

    duplicates, repeats, frames = Duplicates(), Repeats(), []
    with closing(prefetched(ckpts, fetch, ahead=prefetch, size=checkpoint_bytes)) as reads:
        walked = zip(walk(ckpts, progress=progress, desc="weights"), reads, strict=True)
        for ckpt, (_, (digest, found, path, tensors)) in walked:
            rows = found if isinstance(found, pd.DataFrame) else _score(found, metrics, draws)
            if not isinstance(found, pd.DataFrame) and where is not None:
                entries.write(entry(digest), _records(rows))
            frame = with_provenance(rows, ckpt, checkpoint_meta(path), tokens_per_step)
            frame["duplicate_of"] = duplicates.check(ckpt, digest)
            repeat = repeats.check(series_label(ckpt), tensors)
            frame["repeats"] = repeat.describe() if repeat is not None else None
            frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def _score(weights: HeadWeights, metrics: list[str], draws: int) -> pd.DataFrame:
    rows = []
    with torch.no_grad():
        for name in metrics:
            values = WEIGHT_METRICS[name].score(weights, draws).cpu()
            heads = values.shape[1]
            flat = values.flatten().tolist()
            rows += [(i // heads, i % heads, name, v) for i, v in enumerate(flat)]
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    frame[["layer", "head"]] = frame[["layer", "head"]].astype("Int64")
    return frame


def checked_rows_any(value) -> pd.DataFrame:
    """Cached rows, NaN allowed (layer 0 has no earlier layer to compose with)."""
    return checked_rows(value, finite=False)


def _records(rows: pd.DataFrame) -> list[list]:
    return [[int(la), int(h), m, float(v)] for la, h, m, v in rows.itertuples(index=False)]
