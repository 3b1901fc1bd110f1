"""Output folders: ihprobe writes into a new folder, or into one it recognises as its own.

A folder ihprobe builds as a whole (a corpus, a run) carries a marker file, ``.ihprobe``, that
names what it holds and, for a corpus, every file ihprobe wrote there; ihprobe removes only the
files its marker records (:func:`remove_recorded`), and only after the new work's checks have
passed. No name makes a file ihprobe's: a ``.locked`` or ``.tmp-draft.txt`` of the user's counts
as the user's. Every ``--out`` folder passes
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

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import MARKER, atomic_write, check_name_lengths, marker_kind

__all__ = [
    "MARKER",
    "check_output_folder",
    "foreign",
    "mark",
    "marked",
    "recorded",
    "remove_recorded",
    "unrecorded",
]


def mark(folder: str | os.PathLike, kind: str, files: list[str] | None = None) -> None:
    """Write the marker that says ihprobe built ``folder`` as a ``kind``, with the ``files``
    (paths relative to ``folder``) it wrote there, which alone it may remove later."""
    record = {"kind": kind} | ({"files": sorted(files)} if files is not None else {})
    atomic_write(Path(folder) / MARKER, json.dumps(record) + "\n")


def marked(folder: str | os.PathLike, kind: str) -> bool:
    """Whether ``folder`` carries ihprobe's marker for ``kind`` (a regular file: a FIFO or a
    device named ``.ihprobe`` is never read).

    >>> marked("no/such/folder", "corpus")
    False
    """
    return marker_kind(folder) == kind


def recorded(folder: str | os.PathLike) -> list[str] | None:
    """The files (relative paths) ``folder``'s marker records ihprobe wrote, or None when it
    records none (no marker, or an older one).

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> mark(folder, "corpus", ["train/a.txt"]); recorded(folder)
    ['train/a.txt']
    """
    if marker_kind(folder) is None:
        return None
    try:
        files = json.loads((Path(folder) / MARKER).read_bytes()).get("files")
    except (OSError, ValueError):
        return None
    ok = isinstance(files, list) and all(isinstance(f, str) and _inside(f) for f in files)
    return list(files) if ok else None


def _inside(relative: str) -> bool:
    path = Path(relative)
    return bool(relative) and not path.is_absolute() and ".." not in path.parts


def unrecorded(folder: Path) -> list[str]:
    """Every file, link or empty folder under ``folder`` (links not followed) that its marker
    does not record, besides the marker itself: what ihprobe must leave where it is.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> mark(folder, "corpus", ["a.txt"]); _ = (folder / "a.txt").write_text("ours")
    >>> _ = (folder / "notes.txt").write_text("the user's"); unrecorded(folder)
    ['notes.txt']
    """
    files, found = set(recorded(folder) or ()), []
    for root, dirs, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        links = [d for d in dirs if (Path(root) / d).is_symlink()]
        dirs[:] = [d for d in dirs if d not in links]
        for name in [*names, *links]:
            relative = (here / name).as_posix()
            if relative not in files and relative != MARKER:
                found.append(relative)
        if not dirs and not names and here != Path("."):
            found.append(here.as_posix())
    return sorted(found)


def remove_recorded(folder: Path) -> None:
    """Remove the files ``folder``'s marker records, then the folders they leave empty, the
    marker, and ``folder`` itself once empty; nothing else, and nothing through a link.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "corpus"
    >>> (folder / "train").mkdir(parents=True); _ = (folder / "train/a.txt").write_text("ours")
    >>> mark(folder, "corpus", ["train/a.txt"]); remove_recorded(folder); folder.exists()
    False
    """
    files = recorded(folder)
    if files is None:
        raise IhprobeError(
            f"{folder} does not record which files ihprobe wrote there (an older ihprobe built "
            "it), so ihprobe removes none of them: pass a new folder, or remove it yourself."
        )
    parents: set[Path] = set()
    for relative in files:
        path = folder / relative
        if any(p.is_symlink() for p in path.parents if folder in p.parents):
            continue  # a folder on the way was replaced by a link: never delete through it
        if path.is_symlink() or path.is_file():
            path.unlink()
        parents.update(p for p in path.parents if folder in p.parents)
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: it holds something not recorded
            parent.rmdir()
    (folder / MARKER).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def foreign(folder: Path) -> list[str]:
    """Names in ``folder`` other than ihprobe's marker: whatever their names, they are not ihprobe's
    until a marker says so.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / ".tmp-draft.txt").write_text("the user's")
    >>> foreign(folder)
    ['.tmp-draft.txt']
    """
    if not folder.is_dir():
        return []
    mine = MARKER if marker_kind(folder) is not None else None
    return sorted(p.name for p in folder.iterdir() if p.name != mine)


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
    if folder.is_symlink():  # a link to a folder stands for that folder; any other is refused
        if not folder.is_dir():
            raise IhprobeError(
                f"{what} {text!r} is a link to {os.readlink(folder)!r}, which is not a folder; "
                "pass the name of a new folder."
            )
        folder = folder.resolve()
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
