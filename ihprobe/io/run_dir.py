"""The training-run folder: its file names, where each part lives, and :class:`RunDir`, which
writes it (atomic files, appended logs, the lock, clearing what ihprobe wrote). ihprobe's
trainer writes a run directory::

    run.json                 the config and what it resolved to (updates, schedule, model, data)
    metrics.jsonl            one line per logged update: step, tokens, loss, lr, grad_norm, data
    probes.jsonl             with live probes: step, tokens, max_prefix_matching, ar_accuracy
    checkpoints/step-NNNNNN/ HF directories (config, safetensors, tokenizer) + ihprobe.json
    state/step-NNNNNN.pt     the latest training state (weights, optimiser, RNG) for --resume
    .lock                    held (flock) by the process writing the run; says its PID
    .ihprobe                 the marker that says ihprobe made the folder for a run

Reading a run (its checkpoints, whether it finished, its losses) is :mod:`ihprobe.io.runs`.

>>> RunDir("runs/demo").state_file(50).as_posix(), run_meta("no/such/run")
('runs/demo/state/step-000050.pt', None)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import MARKER, append_line, atomic_write, marker_kind, remove_temporary
from ihprobe.core.outputs import mark, marked
from ihprobe.io import folder_lock
from ihprobe.io.validation.meta import check_run_meta

log = logging.getLogger(__name__)

RUN_META, METRICS, PROBES, LOCK = "run.json", "metrics.jsonl", "probes.jsonl", ".lock"
CHECKPOINT_META = "ihprobe.json"  # beside the weights of each trainer checkpoint
CHECKPOINTS_DIR, STATE_DIR = "checkpoints", "state"
RUN_KIND = "run"  # the kind in a run folder's marker (ihprobe.core.outputs)


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


def checkpoint_files(ckpt: Path) -> list[str]:
    """The files the trainer wrote in checkpoint folder ``ckpt``, as its ``ihprobe.json``
    records them (``files``; an older one: the files it checksums, the generation config and
    itself); [] where it has none, so nothing there is the trainer's to remove.

    >>> checkpoint_files(Path("no/such/step-000001"))
    []
    """
    try:
        meta = json.loads((ckpt / CHECKPOINT_META).read_bytes())
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(meta, dict):
        return []
    files = meta.get("files")
    if files is None:  # written before checkpoints listed their files
        files = [*(meta.get("sha256") or {}), "generation_config.json"]
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return []
    inside = [f for f in files if f and "/" not in f and f not in (".", "..", CHECKPOINT_META)]
    return [*inside, CHECKPOINT_META]


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

    def latest_state_step(self) -> int | None:
        """The update of :meth:`latest_state`, read from its name (:meth:`state_file`'s); None
        without one, or for a name that holds no update count."""
        latest = self.latest_state()
        digits = latest.stem.removeprefix("step-") if latest else ""
        return int(digits) if digits.isdigit() else None

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
            if ckpt.is_dir() and not ckpt.is_symlink():
                for name in checkpoint_files(ckpt):  # a user's file beside them stays
                    if (ckpt / name).is_file() and not (ckpt / name).is_symlink():
                        (ckpt / name).unlink()
                with contextlib.suppress(OSError):
                    ckpt.rmdir()
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
