"""Trajectories: the probe battery over every checkpoint of a run, as one tidy table.

Each checkpoint's scan is cached under its weights hash (and the scan settings), in
``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``: re-running after new checkpoints appear scans only
the new ones, and a checkpoint whose weights equal an earlier one's is flagged in the
``duplicate_of`` column (published series sometimes save one state under two steps).

>>> table = trajectory("runs/demo", metrics=["prefix_matching", "ar_accuracy"])  # doctest: +SKIP
>>> table.query("metric == 'ar_accuracy'")[["step", "tokens", "value"]]          # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ihprobe.errors import IhprobeError
from ihprobe.models import Checkpoint

log = logging.getLogger(__name__)

COLUMNS = ("model", "revision", "step", "tokens", "layer", "head", "metric", "value")
CACHE_VERSION = 1  # bump when the cached rows change meaning


def cache_dir(cache: bool | str | os.PathLike | None = True) -> Path | None:
    """Where scans are cached: ``cache`` itself, ``$IHPROBE_CACHE``, or ``~/.cache/ihprobe``."""
    if cache is None or cache is False:
        return None
    if cache is not True:
        return Path(cache).expanduser()
    return Path(os.environ.get("IHPROBE_CACHE") or Path.home() / ".cache" / "ihprobe")


def sources_of(source_or_sources, revisions: Sequence[str] | None = None) -> list[Checkpoint]:
    """The checkpoints named by a run directory, a checkpoint, a hub id with ``revisions``, or
    a list of any of these, ordered by tokens (or step where tokens are unknown)."""
    from ihprobe.models import checkpoints

    items = (
        list(source_or_sources)
        if isinstance(source_or_sources, (list, tuple))
        else [source_or_sources]
    )
    found: list[Checkpoint] = []
    for item in items:
        if isinstance(item, Checkpoint):
            found.append(item)
        elif revisions is not None:
            found.extend(checkpoints(item, revisions=list(revisions)))
        elif Path(item).expanduser().is_dir():
            found.extend(checkpoints(item))
        else:
            found.append(Checkpoint(str(item)))  # a hub id at its default revision
    if not found:
        raise IhprobeError("no checkpoints to scan: pass a run directory or a list of sources.")
    return sorted(found, key=lambda c: (c.tokens is None, c.tokens or 0, c.step or 0))


def trajectory(
    source_or_sources,
    metrics: Sequence[str] | None = None,
    *,
    revisions: Sequence[str] | None = None,
    tokens_per_step: int | None = None,
    cache: bool | str | os.PathLike | None = True,
    progress: bool = False,
    **scan_kwargs,
) -> pd.DataFrame:
    """Scan every checkpoint and return one long table ordered by training tokens.

    Args:
        source_or_sources: a run directory, a checkpoint directory, a hub id (with
            ``revisions``), or a list of these or of :class:`~ihprobe.models.Checkpoint`.
        metrics: scan metrics (see ``ihprobe.probes.battery.METRICS``); None for all.
        revisions: hub revisions to sweep, e.g. ``[f"step{s}" for s in (0, 512, 1000)]``.
        tokens_per_step: B*C, to fill ``tokens`` where the checkpoints do not record it
            (hub revisions): tokens = step * tokens_per_step.
        cache: True for the default cache directory, a path, or False for none.
        progress: show a tqdm bar over checkpoints.
        **scan_kwargs: passed to :func:`ihprobe.scan` (``n``, ``batch``, ``seed``, ``bos``...).

    Returns:
        The ``scan`` columns ``model, revision, step, tokens, layer, head, metric, value``
        plus ``duplicate_of``: the earlier checkpoint with identical weights, or None.

    Example:
        >>> table = trajectory("EleutherAI/pythia-70m", ["prefix_matching"],   # doctest: +SKIP
        ...     revisions=["step0", "step1000", "step2000"], tokens_per_step=2_097_152)
    """
    from tqdm.auto import tqdm

    from ihprobe.models import checkpoint_meta, resolve, weights_hash

    directory = cache_dir(cache)
    settings = _settings_key(metrics, scan_kwargs)
    seen: dict[str, str] = {}  # weights hash -> label of the first checkpoint with it
    scanned: dict[str, pd.DataFrame] = {}  # weights hash -> scan rows, within this call
    scanner = _Scanner()
    frames = []
    for ckpt in tqdm(sources_of(source_or_sources, revisions), disable=not progress):
        path = resolve(ckpt.source, revision=ckpt.revision)
        digest = weights_hash(path)
        duplicate = seen.get(digest)
        if duplicate is not None:
            log.warning("%s has the same weights as %s", ckpt.label, duplicate)
        seen.setdefault(digest, f"{ckpt.source}@{ckpt.revision}" if ckpt.revision else ckpt.source)
        file = directory / "scans" / f"{digest[:32]}-{settings}.json" if directory else None
        rows = scanned.get(digest)
        if rows is None and file is not None:
            rows = _read(file)
        if rows is None:
            rows = scanner.scan(ckpt, metrics, scan_kwargs)
            if file is not None:
                _write(file, rows)
        scanned[digest] = rows
        meta = checkpoint_meta(path)
        step = ckpt.step if ckpt.step is not None else meta.get("step")
        tokens = ckpt.tokens if ckpt.tokens is not None else meta.get("tokens")
        if tokens is None and tokens_per_step and step is not None:
            tokens = step * tokens_per_step
        frame = rows.copy()
        frame.insert(0, "model", str(meta.get("run") or ckpt.source))
        frame.insert(1, "revision", ckpt.revision)
        frame.insert(2, "step", pd.array([step] * len(frame), dtype="Int64"))
        frame.insert(3, "tokens", pd.array([tokens] * len(frame), dtype="Int64"))
        frame["duplicate_of"] = duplicate
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    order = "tokens" if table["tokens"].notna().all() else "step"
    return table.sort_values(order, kind="stable").reset_index(drop=True)


class _Scanner:
    """Scans checkpoints, loading the first and swapping later weights into the same model."""

    def __init__(self):
        self.model = None

    def scan(self, ckpt: Checkpoint, metrics, scan_kwargs) -> pd.DataFrame:
        from ihprobe.models import load_or_swap
        from ihprobe.probes.battery import scan

        self.model = load_or_swap(self.model, ckpt.source, revision=ckpt.revision)
        frame = scan(self.model, metrics, **scan_kwargs).to_frame()
        return frame[["layer", "head", "metric", "value"]].reset_index(drop=True)


def _settings_key(metrics, scan_kwargs: dict) -> str:
    """A short hash of everything besides the weights that changes a scan's numbers."""
    from ihprobe import __version__

    def plain(value):
        if hasattr(value, "tolist"):  # tensors of user tokens
            return value.tolist()
        return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)

    key = {
        "version": [__version__, CACHE_VERSION],
        "metrics": sorted(metrics) if metrics is not None else None,
        "scan": {k: plain(v) for k, v in sorted(scan_kwargs.items())},
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read(file: Path) -> pd.DataFrame | None:
    if not file.is_file():
        return None
    try:
        rows = json.loads(file.read_text())["rows"]
    except (json.JSONDecodeError, KeyError, OSError):
        log.warning("ignoring an unreadable cache file %s", file)
        return None
    frame = pd.DataFrame(rows, columns=["layer", "head", "metric", "value"])
    frame["layer"] = frame["layer"].astype("Int64")
    frame["head"] = frame["head"].astype("Int64")
    frame["value"] = frame["value"].astype(float)
    return frame


def _write(file: Path, rows: pd.DataFrame) -> None:
    """Atomic write (temp file + rename), so an interrupted scan leaves no half file."""
    file.parent.mkdir(parents=True, exist_ok=True)
    records = [
        [None if pd.isna(layer) else int(layer), None if pd.isna(head) else int(head), m, float(v)]
        for layer, head, m, v in rows.itertuples(index=False)
    ]
    fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump({"rows": records}, fh)
    os.replace(tmp, file)


def run_losses(run_dir: str | os.PathLike) -> pd.DataFrame:
    """The training loss a run logged (``metrics.jsonl``): columns ``step, tokens, loss``.

    Example:
        >>> run_losses("runs/demo").tail(1)                          # doctest: +SKIP
    """
    file = Path(run_dir) / "metrics.jsonl"
    if not file.is_file():
        return pd.DataFrame(columns=["step", "tokens", "loss"])
    records = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
    frame = pd.DataFrame(records)
    return frame[["step", "tokens", "loss"]].sort_values("step").reset_index(drop=True)
