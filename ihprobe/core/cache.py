"""The one cache of ihprobe: its root, its keys, and entries checked when they are read.

What is expensive to rebuild is kept under one root, ``$IHPROBE_CACHE`` when set, else
``~/.cache/ihprobe``: token streams, tokenizers and Markov matrices (directories, :func:`entry`)
and the results of scans, ablations and LLC estimates per checkpoint (JSON files,
:func:`read` and :func:`write`). Entries are keyed by a hash of everything that determines
them (:func:`key`) and written atomically, so two processes building one entry never see half
of it.

An entry is trusted only after it passes its checks: a JSON entry carries its format
(:data:`FORMAT`; an entry without one is format 1) and the SHA-256 of its value (an edited
number no longer matches), and every kind of entry is checked by its reader for schema, finite
values and shape. An entry that fails, JSON nested too deep included, or that another format
wrote, is removed with a warning and built again, the same way for every kind. Two processes
that compute one entry at the same time each write a temporary file and rename it over the
entry, so the entry is always one of theirs, whole.

>>> key({"source": "default", "vocab_size": 512})
'4571a7af4e22d413'
>>> import tempfile, pathlib
>>> file = pathlib.Path(tempfile.mkdtemp()) / "scans" / "entry.json"
>>> write(file, [[0, 1, "prefix_matching", 0.5]])
>>> read(file, check=lambda value: value)
[[0, 1, 'prefix_matching', 0.5]]
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_directory, atomic_write

log = logging.getLogger(__name__)

T = TypeVar("T")
FAILED = (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)
FORMAT = 1  # the layout {"format", "sha256", "value"}; bump it when an entry's value changes shape
SPEC_FILE = "spec.json"


def root(cache: bool | str | os.PathLike | None = True) -> Path | None:
    """The cache directory: ``cache`` itself when a path, None when False or None, else
    ``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``. Nothing is created until an entry is written.

    Example:
        >>> root(False) is None, root("/tmp/c")
        (True, PosixPath('/tmp/c'))
    """
    if cache is None or cache is False:
        return None
    if cache is not True:
        return Path(cache).expanduser()
    return Path(os.environ.get("IHPROBE_CACHE") or Path.home() / ".cache" / "ihprobe")


def key(spec: Any) -> str:
    """A short stable hash of a JSON-serialisable spec (keys sorted; other values by ``str``)."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def write(file: Path, value: Any) -> None:
    """Store ``value`` (plain JSON: lists, dicts, numbers, strings) with its format and SHA-256,
    atomically (a temporary file renamed over ``file``)."""
    atomic_write(file, json.dumps({"format": FORMAT, "sha256": _digest(value), "value": value}))


def read(file: Path | None, check: Callable[[Any], T]) -> T | None:
    """The entry in ``file`` as ``check(value)`` returns it, or None when there is none.

    An entry that does not parse, whose checksum does not match its value, or that ``check``
    rejects (by raising ``ValueError``, ``TypeError``, ``KeyError``...) is removed with a warning
    and None is returned, so the caller computes it again.
    """
    if file is None or not file.is_file():
        return None
    try:
        stored = json.loads(file.read_text())
        if not isinstance(stored, dict) or stored.get("format", 1) != FORMAT:
            raise ValueError(f"it is not an entry of cache format {FORMAT}")
        if _digest(stored["value"]) != stored["sha256"]:
            raise ValueError("its checksum does not match its contents")
        return check(stored["value"])
    except FAILED as err:
        _drop(file, err)
        return None


def entry(
    kind: str,
    spec: dict,
    build: Callable[[Path], None],
    check: Callable[[Path], object] | None = None,
) -> Path:
    """The directory of cache entry ``kind/key(spec)``, calling ``build(tmpdir)`` when missing
    or when ``check(directory)`` rejects what is there (it is removed and built again)."""
    base = root()
    final = base / kind / key(spec)
    if final.is_dir():
        try:
            if check is not None:
                check(final)
            return final
        except FAILED as err:
            _drop(final, err)
    try:
        with atomic_directory(final) as tmp:
            build(tmp)
            spec_text = json.dumps(
                {**spec, "cache_format": FORMAT}, sort_keys=True, default=str, indent=1
            )
            (tmp / SPEC_FILE).write_text(spec_text)
    except IhprobeError:
        if not final.is_dir():  # a real failure, not a concurrent writer that won the race
            raise
    return final


def _drop(path: Path, err: Exception) -> None:
    log.warning("dropping the bad cache entry %s (%s); computing it again", path, err)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- checks


def number(value: Any, *, finite: bool = True) -> float:
    """``value`` as a float when it is a JSON number (not a bool), finite unless allowed.

    Example:
        >>> number(2), number(float("nan"), finite=False)
        (2.0, nan)
        >>> number("0.5")
        Traceback (most recent call last):
        ValueError: '0.5' is not a number
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    if finite and not math.isfinite(value):
        raise ValueError(f"{value!r} is not finite")
    return float(value)


def index(value: Any) -> int | None:
    """``value`` as a layer or head index: a non-negative int, or None (a model-level row)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a layer or head index")
    return value


def matrix(value: Any, *, finite: bool = True) -> list[list[float]]:
    """``value`` as a non-empty rectangular list of lists of numbers.

    Example:
        >>> matrix([[1, 2], [3]])
        Traceback (most recent call last):
        ValueError: rows of different lengths
    """
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        raise ValueError("not a list of rows")
    if len({len(r) for r in value}) != 1:
        raise ValueError("rows of different lengths")
    return [[number(x, finite=finite) for x in r] for r in value]
