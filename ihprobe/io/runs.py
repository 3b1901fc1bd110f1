"""The training-run folder: its file names, its checkpoints, its logs, and whether it is finished.

ihprobe's trainer writes a run directory; every other module reads it through here::

    run.json                 the config and what it resolved to (updates, schedule, model, data)
    metrics.jsonl            one line per logged update: step, tokens, loss, lr, grad_norm, data
    probes.jsonl             with live probes: step, tokens, max_prefix_matching, ar_accuracy
    checkpoints/step-NNNNNN/ HF directories (config, safetensors, tokenizer) + ihprobe.json
    state/step-NNNNNN.pt     the latest training state (weights, optimiser, RNG) for --resume
    .lock                    held (flock) by the process writing the run; says its PID
    .ihprobe                 the marker that says ihprobe made the folder for a run

Any directory of HF checkpoint subdirectories (HF Trainer's ``checkpoint-500``) is a run too,
named by that directory (``Checkpoint.run``).

>>> [c.step for c in checkpoints("runs/demo")][:3], is_finished("runs/demo")  # doctest: +SKIP
([0, 50, 100], True)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import MARKER, append_line, atomic_write, marker_kind, remove_temporary
from ihprobe.core.outputs import mark, marked
from ihprobe.io import folder_lock
from ihprobe.io.validation.meta import check_meta, check_run_meta

log = logging.getLogger(__name__)

RUN_META, METRICS, PROBES, LOCK = "run.json", "metrics.jsonl", "probes.jsonl", ".lock"
CHECKPOINT_META = "ihprobe.json"  # beside the weights of each trainer checkpoint
CHECKPOINTS_DIR, STATE_DIR = "checkpoints", "state"
RUN_KIND = "run"  # the kind in a run folder's marker (ihprobe.core.outputs)


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


def run_meta(run_dir: str | os.PathLike) -> dict | None:
    """The run's ``run.json`` (``config``, and what it resolved to: ``steps``, ``tokens``,
    ``model``, ``checkpoint_steps``, ``extensions``...), or None outside ihprobe runs.

    Example:
        >>> run_meta("no/such/run") is None
        True
    """
    file = Path(run_dir) / RUN_META
    if not file.is_file():
        return None
    try:
        meta = json.loads(file.read_text())
    except (ValueError, RecursionError) as err:  # bad JSON or bytes, or nested too deep
        raise IhprobeError(f"{file} is not valid JSON ({err}); the run cannot be read.") from err
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise IhprobeError(f"{file} has no 'config' object; it was not written by ihprobe train.")
    return check_run_meta(file, meta)  # steps, checkpoint steps and extensions well formed


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


# ----------------------------------------------------------------------------- writing a run


class RunDir:
    """The files of one run: paths, atomic writes, logs, and what a resume finds there.

    Example:
        >>> RunDir("runs/x").checkpoint(50).as_posix()
        'runs/x/checkpoints/step-000050'
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.checkpoints = self.root / CHECKPOINTS_DIR
        self.state = self.root / STATE_DIR

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:06d}"

    def state_file(self, step: int) -> Path:
        return self.state / f"step-{step:06d}.pt"

    def exists(self) -> bool:
        return (self.root / RUN_META).is_file() or self.checkpoints.is_dir()

    def has_checkpoints(self) -> bool:
        return any(self.checkpoints.glob("step-*"))

    def latest_checkpoint(self) -> Path | None:
        kept = sorted(self.checkpoints.glob("step-*"))
        return kept[-1] if kept else None

    def latest_state(self) -> Path | None:
        found = sorted(self.state.glob("step-*.pt")) if self.state.is_dir() else []
        return found[-1] if found else None

    def clear(self) -> None:
        """Remove what the trainer wrote here: the run's files, its checkpoints (each carries
        ``ihprobe.json``), its training states, its interrupted writes and its marker, then the
        folders left empty; anything else (a user's file) stays where it is.

        Example:
            >>> import tempfile, pathlib
            >>> run = RunDir(pathlib.Path(tempfile.mkdtemp()) / "run")
            >>> with run.lock():
            ...     _ = (run.root / "notes.txt").write_text("mine")
            >>> run.clear(); sorted(p.name for p in run.root.iterdir())
            ['notes.txt']
        """
        if not (marked(self.root, RUN_KIND) or run_meta(self.root) is not None):
            return  # not a run ihprobe wrote: nothing here is ihprobe's to remove
        self.remove_partial_writes()
        for name in (RUN_META, METRICS, PROBES, LOCK):
            if not (self.root / name).is_dir():
                (self.root / name).unlink(missing_ok=True)
        for ckpt in sorted(self.checkpoints.glob("step-*")) if self.checkpoints.is_dir() else []:
            if ckpt.is_dir() and not ckpt.is_symlink() and (ckpt / CHECKPOINT_META).is_file():
                shutil.rmtree(ckpt)
        for state in sorted(self.state.glob("step-*.pt")) if self.state.is_dir() else []:
            if state.is_file() and not state.is_symlink():
                state.unlink()
        if marked(self.root, RUN_KIND):
            (self.root / MARKER).unlink()
        for folder in (self.checkpoints, self.state, self.root):
            with contextlib.suppress(OSError):  # not empty: it holds what ihprobe did not write
                folder.rmdir()

    def remove_partial_writes(self) -> None:
        """Temporary directories and files left by a process killed while writing."""
        for parent in (self.root, self.checkpoints, self.state):
            for tmp in remove_temporary(parent):
                log.info("removed %s, left by an interrupted write", tmp)

    def write_json(self, name: str, data: dict) -> None:
        atomic_write(self.root / name, json.dumps(data, indent=2) + "\n")

    def append(self, name: str, record: dict) -> None:
        """Append one JSON line (a kill mid-line leaves a line :meth:`records` skips)."""
        append_line(self.root / name, json.dumps(record))

    def records(self, name: str) -> list[dict]:
        """The complete lines of a JSONL file (a line cut by a kill is skipped)."""
        path = self.root / name
        lines = path.read_text().splitlines() if path.is_file() else []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError, RecursionError):
                out.append(json.loads(line))
        return out

    def truncate(self, name: str, step: int) -> None:
        """Keep the lines up to ``step``, once each: a resumed run logs the later ones again."""
        if not (self.root / name).is_file():
            return
        kept: dict[int, dict] = {}
        for record in self.records(name):
            if record.get("step", 0) <= step:
                kept.setdefault(record.get("step", 0), record)
        text = "".join(json.dumps(r) + "\n" for r in kept.values())
        atomic_write(self.root / name, text)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run directory for this process; a second writer gets an :class:`IhprobeError`.

        The hold is an exclusive ``flock`` on ``.lock``, kept on an open descriptor until the
        block ends (or the process dies: the kernel then releases it, so a lock file left by a
        killed process is taken over, atomically, by the next writer). The file says which
        process holds it.

        Example:
            >>> import tempfile
            >>> run = RunDir(tempfile.mkdtemp())
            >>> with run.lock():
            ...     with run.lock():
            ...         pass
            Traceback (most recent call last):
            ...
            ihprobe.core.errors.IhprobeError: ... is in use by process ...
        """
        path = self.root / LOCK
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if marker_kind(self.root) is None and not any(self.root.iterdir()):
                mark(self.root, RUN_KIND)  # a new run folder: ihprobe's, whatever happens next
            fd = folder_lock.take(path)
        except OSError as err:  # a full disk, a read-only folder, a .lock that is a link or folder
            raise IhprobeError(
                f"could not lock {self.root} through {path} ({err.strerror or err}); remove "
                f"{path} if it is not a file ihprobe wrote, or choose another --out."
            ) from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # still holding it: nobody can take the file meanwhile
            os.close(fd)
