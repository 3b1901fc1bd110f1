"""Files written whole or not at all: one atomic-write helper for every module of ihprobe.

A file is written inside a temporary folder (``.tmp-NAME-XXXX``) beside its final name and renamed
over that name when complete, so a reader never sees half a file. The temporary folder carries
ihprobe's marker (``.ihprobe``, kind ``partial``) before anything else is written in it, so a
killed process leaves a folder that the next run recognises by its marker, never by its name, and
removes (:func:`remove_temporary`): a user's ``.tmp-draft.txt`` is never ihprobe's. Every error
path, disk full included, removes the temporary folder and raises
:class:`~ihprobe.core.errors.IhprobeError` with one line.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
>>> atomic_write(path, "hello\\n").read_text()
'hello\\n'
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ihprobe.core.errors import IhprobeError

TMP_PREFIX = ".tmp-"  # the start of every temporary folder's name (its marker makes it ours)
MARKER = ".ihprobe"  # {"kind": ...}: the file that says ihprobe wrote the folder it is in
PARTIAL = "partial"  # the marker's kind in a temporary folder of a write under way


def shared_mode(directory: bool = False) -> int:
    """The mode a new file (or directory) gets under the user's umask: mkstemp and mkdtemp make
    them private (0600/0700), but results are meant to be shared as the user's umask allows.

    >>> oct(shared_mode() & 0o700), oct(shared_mode(directory=True) & 0o700)
    ('0o600', '0o700')
    """
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def atomic_write(path: str | os.PathLike, content: str | bytes | Callable[[Path], object]) -> Path:
    """Write ``content`` (text, bytes, or a function that writes to the path it is given) to
    ``path`` atomically; return ``path``.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
        >>> atomic_write(path, lambda tmp: tmp.write_text("a,b\\n")).read_text()
        'a,b\\n'
    """
    path = Path(path)
    with _in_temporary(path) as folder:
        tmp = folder / path.name
        with open(tmp, "wb") as fh:
            if isinstance(content, str):
                fh.write(content.encode())
            elif isinstance(content, bytes):
                fh.write(content)
        if callable(content):
            content(tmp)
        os.chmod(tmp, shared_mode())
        os.replace(tmp, path)
    return path


def temporary_folder(path: Path) -> Path:
    """A new folder beside ``path`` that carries ihprobe's ``partial`` marker (name cut so that
    the folder's name stays within the file system's 255 bytes)."""
    stem = os.fsencode(path.name)[:64].decode(errors="ignore")
    folder = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{stem}-", dir=path.parent))
    try:
        (folder / MARKER).write_text(json.dumps({"kind": PARTIAL}) + "\n")
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def marker_kind(folder: str | os.PathLike) -> str | None:
    """The kind named by ``folder``'s marker: only a small regular file is read (never a FIFO,
    a device or a link elsewhere), so a hostile ``.ihprobe`` neither hangs nor counts.

    >>> marker_kind("no/such/folder") is None
    True
    """
    file = Path(folder) / MARKER
    try:
        info = os.lstat(file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            return None
        found = json.loads(file.read_bytes()).get("kind")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return found if isinstance(found, str) else None


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line to a log file; a line left cut by an earlier failed write is ended
    first, so the cut line never swallows this one. Errors as :func:`atomic_write`'s.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
        >>> _ = path.write_text('{"cut')
        >>> append_line(path, "{}")
        >>> path.read_text().splitlines()
        ['{"cut', '{}']
    """
    path = Path(path)
    try:
        with open(path, "a+b") as fh:
            cut = fh.tell() > 0 and (fh.seek(-1, os.SEEK_END), fh.read(1))[1] != b"\n"
            fh.write(b"\n" * cut + line.encode() + b"\n")
    except OSError as err:
        _raise_write_error(path, err)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary directory beside ``path``, renamed to ``path`` when the block ends cleanly.

    The rename fails rather than replace an existing directory; on any error the temporary
    directory is removed.

    Example:
        >>> import tempfile, pathlib
        >>> final = pathlib.Path(tempfile.mkdtemp()) / "ckpt"
        >>> with atomic_directory(final) as tmp:
        ...     _ = (tmp / "config.json").write_text("{}")
        >>> sorted(p.name for p in final.iterdir())
        ['config.json']
    """
    path = Path(path)
    with _in_temporary(path) as tmp:
        os.chmod(tmp, shared_mode(directory=True))
        yield tmp
        if marker_kind(tmp) == PARTIAL:  # the block may have marked it as what it built
            (tmp / MARKER).unlink()
        share(tmp)
        os.rename(tmp, path)


def share(folder: Path) -> None:
    """Give every file and folder under ``folder`` the user's umask: writers such as
    safetensors create their files private (0600), which results are not meant to be."""
    modes = (shared_mode(directory=True), shared_mode())
    for root, dirs, files in os.walk(folder):
        for names, mode in zip((dirs, files), modes, strict=True):
            for name in names:
                if not os.path.islink(os.path.join(root, name)):
                    os.chmod(os.path.join(root, name), mode)


def remove_temporary(directory: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders an interrupted write of ihprobe's left in ``directory``:
    those that carry its ``partial`` marker, whatever their names; nothing else.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / ".tmp-draft.txt").write_text("the user's")
        >>> left = temporary_folder(folder / "run.json")
        >>> [p == left for p in remove_temporary(folder)], sorted(os.listdir(folder))
        ([True], ['.tmp-draft.txt'])
    """
    directory = Path(directory)
    found = sorted(
        p
        for p in (directory.iterdir() if directory.is_dir() else ())
        if p.is_dir() and not p.is_symlink() and marker_kind(p) == PARTIAL
    )
    for tmp in found:
        shutil.rmtree(tmp)
    return found


@contextlib.contextmanager
def _in_temporary(path: Path) -> Iterator[Path]:
    """A new temporary folder beside ``path`` (its parent made first) for the block, removed
    after it whatever happens; a failure, there or in the block, is one line."""
    _make_parent(path)
    try:
        folder = temporary_folder(path)
    except OSError as err:
        _raise_write_error(path, err)
        raise
    try:
        yield folder
    except Exception as err:
        _raise_write_error(path, err)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _raise_write_error(path, err)
        raise


def _raise_write_error(path: Path, err: BaseException) -> None:
    """Raise one line for the OS error behind a failed write of ``path`` (disk full named as
    such); return when there is none, for the caller to re-raise ``err`` as it is.

    Writers such as ``torch.save`` and safetensors wrap the OS error in their own exception;
    it is found in the exception chain or in their message (``os error 28``).
    """
    code, reason = _os_reason(err)
    if code == errno.ENOSPC:
        raise IhprobeError(f"disk full while writing {path}; free space and run again.") from err
    if code == errno.EFBIG:
        raise IhprobeError(
            f"file size limit reached while writing {path} (File too large); raise the limit "
            "(ulimit -f) or free space, and run again."
        ) from err
    if reason is not None:
        raise IhprobeError(f"could not write {path}: {reason}.") from err


def _os_reason(err: BaseException) -> tuple[int | None, str | None]:
    """``(errno, reason)`` of the OS error behind ``err``, or ``(None, None)``."""
    seen: BaseException | None = err
    chain: set[int] = set()
    while seen is not None and id(seen) not in chain:
        chain.add(id(seen))
        if isinstance(seen, IhprobeError):
            return None, None
        if isinstance(seen, OSError):
            return seen.errno, seen.strerror or str(seen)
        found = re.search(r"os error (\d+)", str(seen))
        if found:
            code = int(found.group(1))
            return code, os.strerror(code)
        seen = seen.__cause__ or seen.__context__
    return None, None
