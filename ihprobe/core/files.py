"""Files and paths: each path checked before any work (a writable ``--out``, names the file
system allows, a local source that can be a checkpoint) and a file's checksum. Files are written
whole or not at all by :mod:`ihprobe.core.atomic`, whose names are imported from here too.

>>> check_name_lengths("runs/" + "x" * 255).name == "x" * 255
True
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ihprobe.core.atomic import (
    MARKER,
    PARTIAL,
    TMP_PREFIX,
    append_line,
    atomic_directory,
    atomic_write,
    marker_kind,
    remove_temporary,
    share,
    shared_mode,
    temporary_folder,
)
from ihprobe.core.errors import IhprobeError

__all__ = [
    "MARKER",
    "NAME_MAX",
    "PARTIAL",
    "PATH_MAX",
    "TMP_PREFIX",
    "append_line",
    "atomic_directory",
    "atomic_write",
    "check_local_source",
    "check_name_lengths",
    "check_writable_dir",
    "check_writable_file",
    "looks_local",
    "marker_kind",
    "remove_temporary",
    "sha256_file",
    "share",
    "shared_mode",
    "temporary_folder",
]


def sha256_file(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> sha256_file(atomic_write(path, b""))[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def check_writable_dir(path: str | os.PathLike, what: str = "--out") -> Path:
    """Raise unless ``path`` is a directory ihprobe can create or write into, before any work.

    Example:
        >>> import tempfile
        >>> check_writable_dir(tempfile.mkdtemp()).is_dir()
        True
    """
    path = check_name_lengths(Path(path), what)
    if path.exists() and not path.is_dir():
        raise IhprobeError(f"{what} {path} is a file, not a directory; pass a directory.")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise IhprobeError(f"{what} {path}: {existing} is a file; choose another {what}.")
    try:  # a real write: permissions, read-only mounts and root all answer the same way
        with tempfile.TemporaryFile(dir=existing, prefix=TMP_PREFIX):
            pass
    except OSError as err:
        raise IhprobeError(
            f"{what} {path}: {existing} is not writable ({err.strerror}); choose another {what}."
        ) from err
    return path


NAME_MAX = 255  # bytes in one part of a path on Linux file systems


PATH_MAX = 4096  # bytes in a whole path on Linux, its ending zero included


def check_name_lengths(path: str | os.PathLike, what: str = "--out") -> Path:
    """``path`` when no part of it is longer than the file system allows (255 bytes), the whole
    path fits Linux's 4,096 bytes, and it is valid UTF-8 (the tokenizer and HF libraries cannot
    write or read other names).

    >>> check_name_lengths("runs/" + "x" * 300)                         # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: --out: the name xxxx... is 300 bytes long; ...
    >>> check_name_lengths(os.fsdecode(b"runs/r\\xff"))                  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: --out: the name 'r\\xff' is not valid UTF-8; ...
    """
    text = os.fspath(path)
    try:
        text.encode()
    except UnicodeEncodeError:
        bad = next(p for p in Path(text).parts if not _utf8(p))
        shown = os.fsencode(bad).decode(errors="backslashreplace")
        raise IhprobeError(
            f"{what}: the name '{shown}' is not valid UTF-8; the tokenizer and HF libraries "
            "read and write only UTF-8 names: rename it."
        ) from None
    whole = len(os.fsencode(os.path.abspath(text)))
    if whole >= PATH_MAX:
        raise IhprobeError(
            f"{what}: the path is {whole:,} bytes long; Linux allows {PATH_MAX - 1:,}: choose a "
            "shorter path."
        )
    for part in Path(path).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise IhprobeError(
                f"{what}: the name {part[:20]}... is {len(os.fsencode(part))} bytes long; file "
                f"systems allow {NAME_MAX}: choose a shorter name."
            )
    return Path(path)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def looks_local(text: str) -> bool:
    """Whether a source names a local path rather than a hub id (``org/name``): it starts with
    ``/``, ``.`` or ``~``, has a backslash or several slashes, or its first part exists here.

    >>> looks_local("/data/ckpt"), looks_local("./ckpt"), looks_local("EleutherAI/pythia-70m")
    (True, True, False)
    """
    if text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1:
        return True
    return "/" in text and Path(text.split("/")[0]).exists()


def check_local_source(text: str) -> str:
    """``text`` unless it names a local path that cannot be a checkpoint: a missing path that
    looks local (never looked up on the hub), a file, or a name part over 255 bytes. Cheap: no
    heavy import, no hub request.

    >>> check_local_source("/no/such/checkpoint")                       # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: /no/such/checkpoint does not exist; ...
    """
    check_name_lengths(text, "SOURCE")
    path = Path(text).expanduser()
    if path.is_file() or (path.exists() and not path.is_dir()):
        raise IhprobeError(f"{text} is a file; pass the checkpoint or run directory.")
    if not path.exists() and looks_local(text):
        raise IhprobeError(
            f"{text} does not exist; pass an existing checkpoint or run directory, or a hub id "
            "such as EleutherAI/pythia-70m."
        )
    return text


PAGE_MARK = '<meta name="generator" content="ihprobe">'  # in the head of every page it writes


def ihprobe_page(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HTML page ihprobe wrote (its head carries :data:`PAGE_MARK`).

    >>> ihprobe_page("no/such/page.html")
    False
    """
    try:
        with open(path, "rb") as handle:
            return PAGE_MARK.encode() in handle.read(4096)
    except OSError:
        return False


def check_writable_file(
    path: str | os.PathLike, what: str = "--out", *, page: bool = False
) -> Path:
    """Raise unless a file can be written at ``path`` (its directory writable, not a directory);
    with ``page``, an existing file there must be a page ihprobe wrote (:func:`ihprobe_page`),
    never an input or a user's file.

    Example:
        >>> import tempfile, pathlib
        >>> check_writable_file(pathlib.Path(tempfile.mkdtemp()) / "r.html").name
        'r.html'
    """
    path = Path(path)
    if path.is_dir():
        raise IhprobeError(f"{what} {path} is a directory; pass a file name.")
    if page and (path.exists() or path.is_symlink()) and not ihprobe_page(path):
        raise IhprobeError(
            f"{what} {path} already exists and is not a page ihprobe wrote; pass a new file name."
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise IhprobeError(f"{what} {path} is read-only; choose another {what}.")
    check_writable_dir(path.parent, what)
    return path
