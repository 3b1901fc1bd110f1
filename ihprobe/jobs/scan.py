"""The scan job: score every head of one or more sources and write the table and heatmaps.

:func:`scan_job` is what ``ihprobe scan`` runs: each source (a checkpoint, a run directory, a
hub id with revisions, or a suite's checkpoints) is swept checkpoint by checkpoint into one
skeleton (:func:`~ihprobe.dynamics.trajectories.scan_checkpoints`), and rank 0 writes
``scores.csv`` (the long table, one block per checkpoint, ``duplicate_of`` naming an earlier
checkpoint of identical weights, ``repeats`` the shards or tensors that repeat an earlier
checkpoint's) and ``heatmaps.html`` (a heatmap per head metric, with a slider over the
checkpoints of a source). Under ``torchrun`` each rank scans every N-th checkpoint.

>>> done = scan_job(["runs/demo"], "scans/demo", metrics=["prefix_matching"])  # doctest: +SKIP
>>> done.table.query("metric == 'prefix_matching'").nlargest(3, "value")      # doctest: +SKIP
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ihprobe.core.files import atomic_write
from ihprobe.core.stages import STAGE
from ihprobe.core.world import is_main_process, join_world
from ihprobe.dynamics.trajectories import scan_checkpoints
from ihprobe.figures.fv_series import scan_fv_blocks
from ihprobe.figures.heads import checkpoint_slider, head_heatmap
from ihprobe.figures.report import Markup, Section, write_report
from ihprobe.io.provenance import csv_table
from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import sources_of
from ihprobe.probes.metrics import check_metrics
from ihprobe.probes.scores import HeadScores

log = logging.getLogger(__name__)

FILES = ("scores.csv", "heatmaps.html")


@dataclass
class ScanDone:
    """What :func:`scan_job` scanned and wrote.

    ``last`` holds the scores of each source's last checkpoint with the earlier checkpoint of
    identical weights (or None); ``files`` is empty on the ranks that do not write.
    """

    table: pd.DataFrame
    last: list[tuple[HeadScores, str | None]]
    files: list[Path] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"ScanDone({len(self.table)} rows, {len(self.last)} sources, files={self.files})"


def scan_job(
    sources: Sequence[str | os.PathLike | Sequence[Checkpoint]],
    out: str | os.PathLike,
    *,
    metrics: Sequence[str] | str | None = None,
    revisions: Sequence[str] | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    keep: str = "all",
    progress: bool | None = None,
    placement: dict | None = None,
    cache: bool | str | os.PathLike | None = True,
    **scan_kwargs,
) -> ScanDone:
    """Scan ``sources`` and write ``out/scores.csv`` and ``out/heatmaps.html`` (rank 0; over
    60 lines with this docstring, which names every keyword).

    Args:
        sources: checkpoints, run directories or hub ids, or lists of
            :class:`~ihprobe.io.runs.Checkpoint` (a suite's, :func:`ihprobe.suite_checkpoints`),
            each one section of the heatmaps.
        out: output directory.
        metrics: scan metrics (None: all); checked before any model is loaded.
        revisions: hub revisions, each one a checkpoint of every hub source.
        device, dtype: where and in which precision the models are loaded.
        keep: ``"none"`` removes each hub revision from the HF cache once it is scanned.
        progress: a bar per source (None: only on a terminal).
        placement: a device map each checkpoint is loaded under (``device_map``,
            ``max_memory``, ``offload_folder`` of :func:`ihprobe.load`).
        cache: the results cache each checkpoint's scores are recorded in once it is scanned
            (True: ``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``; a path; False: none), under
            its weights hash and every setting: a rerun or an interrupted series reads them
            there without fetching (offline too); a changed setting scans again.
        **scan_kwargs: :func:`ihprobe.scan` settings (``n``, ``batch``, ``seed``, ``text``...).
    """
    wanted = check_metrics(metrics)
    frames, last, sections = [], [], []
    with join_world(device):  # one torchrun job for all sources
        for source in sources:
            ckpts = sources_of(source, revisions or None)
            named = source if isinstance(source, (str, os.PathLike)) else ckpts[0].source
            log.info("scanning %s: %d checkpoint(s)", named, len(ckpts), extra=STAGE)
            found = scan_checkpoints(
                ckpts,
                wanted,
                progress=progress,
                device=device,
                dtype=dtype,
                keep=keep,
                placement=placement,
                cache=cache,
                **scan_kwargs,
            )
            source = pd.concat(
                [
                    scores.to_frame().assign(duplicate_of=dup, repeats=repeat)
                    for scores, dup, repeat in found
                ],
                ignore_index=True,
            )
            frames.append(source)
            last.append(found[-1][:2])
            sections += _heatmaps([scores for scores, *_ in found], _repeat_paragraph(source))
    table = csv_table(pd.concat(frames, ignore_index=True))
    if not is_main_process():
        return ScanDone(table, last)
    files = [Path(out) / name for name in FILES]
    atomic_write(files[0], lambda tmp: table.to_csv(tmp, index=False))
    write_report(files[1], "ihprobe scan: head scores", sections)
    return ScanDone(table, last, files)


def _heatmaps(series: list[HeadScores], notes: Sequence[str] = ()) -> list[Section]:
    """One heatmap per head metric of a source; a slider over its checkpoints when several;
    ``notes`` (paragraphs) first. ``fv`` (computed only when asked for, and skipped with a note
    where no task is done above chance) beside prefix matching, its skip notes as text
    (:func:`~ihprobe.figures.fv_series.scan_fv_blocks`)."""
    metrics = [metric for metric in series[-1].head if metric != "fv"]
    if len(series) > 1:
        blocks = [checkpoint_slider(series, metric) for metric in metrics]
    else:
        blocks = [head_heatmap(series[-1], metric) for metric in metrics]
    blocks += scan_fv_blocks(series)
    if not blocks:
        return []
    return [Section(series[-1].provenance.label, [*notes, *blocks])]


def repeat_notes(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(checkpoint, what repeats) of each checkpoint the table's ``repeats`` column flags."""
    flagged = table.dropna(subset=["repeats"]).drop_duplicates(["model", "revision", "step"])
    return [(checkpoint_name(row), row.repeats) for row in flagged.itertuples()]


def checkpoint_name(row) -> str:
    """A table row's checkpoint: its revision, else its model and step."""
    return row.revision if isinstance(row.revision, str) else f"{row.model} step {row.step}"


def _repeat_paragraph(table: pd.DataFrame) -> list[str]:
    """The page's paragraph on repeated weights: what the command line notes, from the same
    columns (``duplicate_of``, ``repeats``); empty when nothing repeats.

    >>> row = {"model": "m", "revision": "step2", "step": 2, "duplicate_of": None}
    >>> _repeat_paragraph(pd.DataFrame([{**row, "repeats": None}]))
    []
    >>> said = _repeat_paragraph(pd.DataFrame([{**row, "repeats": "shard b repeats m@step1"}]))
    >>> print(said[0].split("</code>): ")[1])
    step2: shard b repeats m@step1.</p>
    """
    said = [
        f"checkpoints with the same weights as {name}"
        for name in table["duplicate_of"].dropna().unique()
    ]
    said += [f"{name}: {what}" for name, what in repeat_notes(table)]
    if not said:
        return []
    head = "<b>Repeated weights</b> (the CSV's <code>duplicate_of</code> and <code>repeats</code>)"
    return [Markup(f"<p>{head}: {html.escape('; '.join(said))}.</p>")]
