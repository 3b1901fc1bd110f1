"""The studies' results files written whole or not at all: each is written to a temporary file in
its own folder and renamed over its name when complete (``os.replace``), so a kill or a full disk
mid-write leaves the old file as it was, and the temporary file is removed on any error.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "RESULTS.md"
>>> write_text(path, "# results\\n").read_text()
'# results\\n'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write`` with a temporary path beside ``path``, then rename it over ``path``; on any
    error the temporary file is removed and ``path`` keeps its old content. The new file gets the
    old one's mode, or the user's umask's for a new file (mkstemp alone would make it 0600).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> write_atomic(path, lambda tmp: tmp.write_text("a,b\\n")).read_text()
    'a,b\\n'
    """
    path = Path(path)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else _new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``text`` to ``path``, atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def write_csv(path: str | os.PathLike, frame: pd.DataFrame) -> Path:
    """``frame`` to ``path`` as CSV without its index, atomically."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def _new_file_mode() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask
