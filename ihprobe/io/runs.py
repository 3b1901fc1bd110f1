"""Reading a training run: its checkpoints in training order, and what it says (``run.json``,
whether it finished, its logged losses). The folder's layout and its writer,
:class:`~ihprobe.io.run_dir.RunDir`, are :mod:`ihprobe.io.run_dir`; every other module reads a
run and names its files through here.

Any directory of HF checkpoint subdirectories (HF Trainer's ``checkpoint-500``) is a run too,
named by that directory (``Checkpoint.run``).

>>> [c.step for c in checkpoints("runs/demo")][:3], is_finished("runs/demo")  # doctest: +SKIP
([0, 50, 100], True)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.io.run_dir import (
    CHECKPOINT_META,
    CHECKPOINTS_DIR,
    LOCK,
    METRICS,
    PROBES,
    RUN_KIND,
    RUN_META,
    STATE_DIR,
    RunDir,
    run_meta,
)
from ihprobe.io.validation.meta import check_meta

__all__ = [
    "CHECKPOINT_META",
    "CHECKPOINTS_DIR",
    "LOCK",
    "METRICS",
    "PROBES",
    "RUN_KIND",
    "RUN_META",
    "STATE_DIR",
    "Checkpoint",
    "RunDir",
    "checkpoint_meta",
    "checkpoints",
    "config_changes",
    "data_means",
    "is_finished",
    "looks_like_run",
    "losses",
    "run_meta",
    "run_shape",
]


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a training run: where it is and how far training had got.

    >>> checkpoints("org/model", ["step20"])[0]
    Checkpoint(source='org/model', revision='step20', step=20, tokens=None, run=None)
    """

    source: str  # local directory or hub id
    revision: str | None = None  # hub revision (e.g. Pythia "step1000"); None for local dirs
    step: int | None = None  # optimiser updates done when it was saved, when known
    tokens: int | None = None  # training tokens seen when it was saved, when known
    run: str | None = None  # the run directory it was listed from (its series' name)

    def __post_init__(self):  # Checkpoint(step="a") is one line, not a later TypeError
        checks.checkpoint_fields(self)

    @property
    def label(self) -> str:
        return self.revision or Path(self.source).name


# ----------------------------------------------------------------------------- checkpoints


def checkpoint_meta(path: str | os.PathLike) -> dict:
    """``ihprobe.json`` of a trainer checkpoint, or {} for other checkpoints."""
    file = Path(path) / CHECKPOINT_META
    if not file.is_file():
        return {}
    try:
        meta = json.loads(file.read_text())
    except (ValueError, RecursionError) as err:  # bad JSON or bytes, or nested too deep
        raise IhprobeError(f"{file} is not valid JSON ({err}); re-save the checkpoint.") from err
    return check_meta(file, meta)  # step, tokens and sha256 well formed


def checkpoints(source: str | os.PathLike, revisions: list[str] | None = None) -> list[Checkpoint]:
    """The checkpoints of a run, in training order, with step and tokens where known.

    Args:
        source: a run directory (ihprobe's trainer writes ``checkpoints/step-NNNNNN/``; any
            directory of HF checkpoint subdirectories such as HF Trainer's ``checkpoint-500``
            works too), a single checkpoint directory, or a hub id together with ``revisions``.
        revisions: hub revisions to sweep, e.g. ``[f"step{s}" for s in (0, 1000, 2000)]``;
            steps are read from digits in the names.

    Example:
        >>> [c.revision for c in checkpoints("org/model", ["step20", "step3"])]
        ['step3', 'step20']
    """
    checks.source(source)
    if revisions is not None:
        revisions = [checks.text("revisions", r) for r in checks.sequence("revisions", revisions)]
        found = [Checkpoint(str(source), r, _digits(r)) for r in revisions]
        return sorted(found, key=lambda c: (c.step is None, c.step or 0))
    path = Path(source).expanduser()
    if not path.is_dir():
        raise IhprobeError(
            f"{source} is not a directory; pass a run directory, or a hub id with revisions=[...]."
        )
    if (path / "config.json").is_file():
        meta = checkpoint_meta(path)
        return [Checkpoint(str(path), None, meta.get("step"), meta.get("tokens"))]
    found = []
    for sub in _candidate_dirs(path):
        if (sub / "config.json").is_file():
            meta = checkpoint_meta(sub)
            step = meta.get("step", _digits(sub.name))
            found.append(Checkpoint(str(sub), None, step, meta.get("tokens"), run=str(path)))
    if not found:
        raise IhprobeError(
            f"{path} holds no checkpoints: looked for subdirectories with config.json in {path} "
            f"and {path / CHECKPOINTS_DIR}."
        )
    return sorted(found, key=lambda c: (c.step is None, c.step or 0, c.source))


def looks_like_run(path: Path) -> bool:
    """Whether ``path`` is a run directory rather than one checkpoint."""
    return (path / RUN_META).is_file() or any(
        (p / "config.json").is_file() for p in _candidate_dirs(path)
    )


def _candidate_dirs(path: Path) -> list[Path]:
    roots = [path / CHECKPOINTS_DIR, path]
    return [
        p
        for root in roots
        if root.is_dir()
        for p in sorted(root.iterdir())
        if p.is_dir() and not p.name.startswith(".")
    ]


STEP_NAME = re.compile(r".*?(?:step|checkpoint|ckpt|iter)[-_]?(\d+)(?:[-_].*)?|(\d+)", re.I)


def _digits(name: str) -> int | None:
    """The step a checkpoint's or revision's name gives: its digits where the name is a
    number or has one right after ``step``, ``checkpoint``, ``ckpt`` or ``iter``; a model's
    name whose digits say something else (``gpt2-124m``, ``pythia-70m``) gives none.

    >>> [_digits(n) for n in ("step-000500", "checkpoint-500", "step1000-tokens4B", "iter_7")]
    [500, 500, 1000, 7]
    >>> [_digits(n) for n in ("300", "gpt2-124m", "pythia-70m-deduped", "llama3-8b", "main")]
    [300, None, None, None, None]
    """
    found = STEP_NAME.fullmatch(name)
    return int(found.group(1) or found.group(2)) if found else None


# ----------------------------------------------------------------------------- what a run says


def is_finished(run_dir: str | os.PathLike) -> bool:
    """Whether an ihprobe run wrote its final checkpoint.

    Example:
        >>> is_finished("no/such/run")
        False
    """
    meta = run_meta(run_dir) if Path(run_dir).is_dir() else None
    if meta is None or "steps" not in meta:
        return False
    return (RunDir(run_dir).checkpoint(int(meta["steps"])) / "config.json").is_file()


def config_changes(
    run_dir: str | os.PathLike, wanted: dict, ignore: tuple[str, ...] = ()
) -> dict[str, tuple[object, object]]:
    """Config fields whose value in the run's ``run.json`` differs from ``wanted``:
    ``{field: (saved, wanted)}``. Values compare as JSON (a tuple equals a list).

    Example:
        >>> config_changes("no/such/run", {"lr": 0.1})
        {}
    """
    meta = run_meta(run_dir) if Path(run_dir).is_dir() else None
    if meta is None:
        return {}
    saved = meta["config"]
    wanted = json.loads(json.dumps(wanted))
    return {
        k: (saved.get(k), v)
        for k, v in wanted.items()
        if k not in ignore and k in saved and saved[k] != v
    }


def run_shape(run_dir: str | os.PathLike) -> tuple[int | None, int | None]:
    """``(batch_size, context)`` of an ihprobe run (from ``run.json`` or a checkpoint's
    ``ihprobe.json``); ``(None, None)`` for other directories.

    Example:
        >>> run_shape("no/such/run")
        (None, None)
    """
    path = Path(run_dir)
    meta = run_meta(path) if path.is_dir() else None
    config = meta["config"] if meta else {}
    if config.get("batch_size") and config.get("context"):
        return int(config["batch_size"]), int(config["context"])
    if path.is_dir():
        last = checkpoint_meta(Path(checkpoints(path)[-1].source))
        if last.get("batch_size") and last.get("context"):
            return int(last["batch_size"]), int(last["context"])
    return None, None


def losses(run_dir: str | os.PathLike) -> pd.DataFrame:
    """The training loss a run logged (``metrics.jsonl``): columns ``step, tokens, loss``.

    Example:
        >>> losses("no/such/run").columns.tolist()
        ['step', 'tokens', 'loss']
    """
    records = RunDir(run_dir).records(METRICS)
    if not records:
        return pd.DataFrame(columns=["step", "tokens", "loss"])
    frame = pd.DataFrame(records)
    return frame[["step", "tokens", "loss"]].sort_values("step").reset_index(drop=True)


def data_means(run_dir: str | os.PathLike, keys: tuple[str, ...]) -> dict[str, float]:
    """Mean over the logged updates of the data properties ``keys`` (``metrics.jsonl`` "data").

    Example:
        >>> data_means("no/such/run", ("repetition",))
        {}
    """
    frame = pd.DataFrame([r.get("data", {}) for r in RunDir(run_dir).records(METRICS)])
    return {k: float(frame[k].mean()) for k in keys if k in frame}
