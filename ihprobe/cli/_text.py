"""``--text PATH`` on every command that reads natural text: the flag, the files it names (a
file, a directory's files or a glob's matches) and their contents, regular UTF-8 files only."""

from __future__ import annotations

import argparse
import logging
import os
import stat
from pathlib import Path

from ihprobe.core.errors import IhprobeError

TEXT_LIMIT = 256 * 2**20  # bytes of a --text file read into memory


def add_text(
    p: argparse.ArgumentParser, what: str = "ICL score", default: str = "none, skipped"
) -> None:
    """``--text PATH``: a UTF-8 text file, a directory of them or a glob, everywhere
    (:func:`text_files`)."""
    p.add_argument(
        "--text",
        metavar="PATH",
        help=f"UTF-8 text file, directory or glob for the {what} (default: {default})",
    )


def text_files(path: str) -> list[Path]:
    """The files ``--text PATH`` names: the file itself, a directory's files (recursively, in
    order) or a glob's matches; a path that is none of these is returned as it is, so that
    reading it says what is wrong.

    >>> text_files("/no/such/*.txt")
    []
    """
    import glob

    if any(c in path for c in "*?["):
        return [Path(p) for p in sorted(glob.glob(path, recursive=True)) if Path(p).is_file()]
    if Path(path).is_dir():
        return sorted(p for p in Path(path).rglob("*") if p.is_file())
    return [Path(path)]


def read_text_option(path: str | None) -> str | list[str] | None:
    """The contents of a ``--text PATH`` option (a list of documents for a directory or glob),
    or None when it was not given; only regular files of at most :data:`TEXT_LIMIT` bytes in
    all are opened (a FIFO or device would hang or never end)."""
    if path is None:
        return None
    files = text_files(path)
    if not files:
        raise IhprobeError(f"--text {path} names no text files; pass a file, directory or glob.")
    if len(files) > 1 or files[0] != Path(path):
        total = sum(f.stat().st_size for f in files)
        if total > TEXT_LIMIT:
            raise IhprobeError(
                f"--text {path} holds {total:,} bytes, more than {TEXT_LIMIT:,}; pass fewer files."
            )
        found = {f: _read_text_file(str(f), skip_binary=True) for f in files}
        skipped = [f for f, text in found.items() if text is None]
        if len(skipped) == len(files):
            raise IhprobeError(
                f"--text {path} holds no UTF-8 text files ({len(files)} binary or non-UTF-8, "
                f"e.g. {skipped[0]}); pass a file, directory or glob of text."
            )
        if skipped:  # said, once: a folder of notes with a PDF in it still reads its notes
            logging.getLogger("ihprobe").warning(
                "--text %s: skipped %d file(s) that are not UTF-8 text (e.g. %s)",
                path,
                len(skipped),
                skipped[0],
            )
        return [text for text in found.values() if text is not None]
    return _read_text_file(path)


def _read_text_file(path: str, skip_binary: bool = False) -> str | None:
    """One regular UTF-8 file's text (see :func:`read_text_option`); with ``skip_binary``,
    None for a file that is not UTF-8 or holds a NUL byte, instead of refusing it."""
    try:
        found = os.stat(path)
    except (OSError, ValueError) as err:
        raise IhprobeError(
            f"cannot read --text {path!r}: {getattr(err, 'strerror', err)}."
        ) from err
    if not stat.S_ISREG(found.st_mode):
        raise IhprobeError(f"--text {path} is not a regular file; pass a plain text file.")
    if found.st_size > TEXT_LIMIT:
        raise IhprobeError(
            f"--text {path} has {found.st_size:,} bytes, more than {TEXT_LIMIT:,}; pass a "
            "shorter excerpt (the probes read a few thousand tokens)."
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
        if skip_binary and "\x00" in text:
            return None
        return text
    except UnicodeDecodeError:
        if skip_binary:
            return None
        raise IhprobeError(f"--text {path} is not UTF-8 text; pass a plain text file.") from None
    except OSError as err:
        raise IhprobeError(f"cannot read --text {path}: {err.strerror}.") from err
