"""Output folders: ihprobe writes into a new folder, or into one it recognises as its own.

A folder ihprobe builds as a whole (a corpus) carries a marker file, ``.ihprobe``, that names
what it holds; only such a folder is ever replaced. Every ``--out`` folder passes
:func:`check_output_folder` before any work: an empty name, ``.``, ``~``, ``/``, the current or
the home folder, a file, a name part over 255 bytes, or an existing folder that holds files
ihprobe did not write is refused with one line, so nothing of the user's is deleted or mixed
with results.

>>> import tempfile, pathlib
>>> new = pathlib.Path(tempfile.mkdtemp()) / "corpus"
>>> check_output_folder(new, kind="corpus") == new
True
>>> check_output_folder("")
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: --out '' names no folder; pass the name of a new folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import TMP_PREFIX, atomic_write, check_name_lengths

MARKER = ".ihprobe"  # {"kind": "corpus"}: a folder ihprobe built and may replace
IGNORED = (TMP_PREFIX, ".lock")  # left by ihprobe's own interrupted writes and locks


def mark(folder: str | os.PathLike, kind: str) -> None:
    """Write the marker that says ihprobe built ``folder`` as a ``kind``."""
    atomic_write(Path(folder) / MARKER, json.dumps({"kind": kind}) + "\n")


def marked(folder: str | os.PathLike, kind: str) -> bool:
    """Whether ``folder`` carries ihprobe's marker for ``kind``.

    >>> marked("no/such/folder", "corpus")
    False
    """
    try:
        return json.loads((Path(folder) / MARKER).read_text()).get("kind") == kind
    except (OSError, ValueError, AttributeError):
        return False


def foreign(folder: Path) -> list[str]:
    """Names in ``folder`` that ihprobe's own temporary files and locks do not explain."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(IGNORED))


def check_output_folder(
    path: str | os.PathLike,
    what: str = "--out",
    *,
    kind: str | None = None,
    ours: Callable[[Path], bool] = lambda folder: False,
) -> Path:
    """``path`` as a folder ihprobe may write: new, empty, marked as a ``kind``, or one that
    ``ours`` recognises (a run folder); anything else is one line naming what is there.

    Example:
        >>> import tempfile, pathlib
        >>> mine = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (mine / "thesis.txt").write_text("work")
        >>> check_output_folder(mine)                                    # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: --out ... already holds thesis.txt, which ihprobe did not write; ...
    """  # noqa: E501
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if text is None or not text.strip():
        raise IhprobeError(f"{what} {text!r} names no folder; pass the name of a new folder.")
    folder = Path(text).expanduser()
    check_name_lengths(folder, what)
    special = {Path.cwd().resolve(), Path.home().resolve(), Path(folder.resolve().anchor)}
    if folder.resolve() in special:
        raise IhprobeError(
            f"{what} {text!r} is the current, home or root folder; ihprobe writes only into a "
            "new folder or one it made: pass the name of a new folder."
        )
    if folder.exists() and not folder.is_dir():
        raise IhprobeError(f"{what} {folder} is a file, not a folder; pass a new folder's name.")
    found = foreign(folder)
    if found and not (kind is not None and marked(folder, kind)) and not ours(folder):
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise IhprobeError(
            f"{what} {folder} already holds {shown}, which ihprobe did not write; it never "
            "writes into or deletes such a folder: pass the name of a new folder."
        )
    return folder
