"""One writer per run folder: an exclusive ``flock`` on its ``.lock`` file, held on an open
descriptor, which names the process that holds it (``RunDir.lock`` takes it).

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / ".lock"
>>> fd = take(path)
>>> holder(path).startswith("process ")
True
>>> os.close(fd)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
from pathlib import Path

from ihprobe.core.errors import IhprobeError

log = logging.getLogger(__name__)


def take(path: Path) -> int:
    """An open descriptor of ``path`` with an exclusive ``flock`` held on it.

    The holder unlinks the file before it lets go, so a process that opened the old file and
    then got the lock holds a file nobody else sees: it checks that the path still names its
    file and tries again if not.
    """
    mine = f"{os.getpid()} {socket.gethostname()}\n".encode()
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            who = holder(path)
            raise IhprobeError(
                f"{path.parent} is in use by {who} (another ihprobe train); wait for it to "
                "finish, or stop it first."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        if not same_file(fd, path):
            os.close(fd)  # the holder removed it as we took it: lock the current file
            continue
        left = os.pread(fd, 256, 0).decode(errors="replace").split()
        if left and left[0] != str(os.getpid()):
            log.warning("taking over %s, left by process %s that no longer holds it", path, left[0])
        with contextlib.suppress(OSError):  # who holds it is for messages; the flock is the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, mine, 0)
        return fd
    raise IhprobeError(f"could not lock {path.parent}; other processes keep taking it.")


def same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def holder(path: Path) -> str:
    """Who holds the lock, as the lock file says: ``"process 1234"`` (or on another host)."""
    try:
        pid, _, host = path.read_text().partition(" ")
    except OSError:
        pid, host = "", ""
    if not pid.strip().isdigit():
        return "another process"  # it has the lock and is about to write its id
    host = host.strip()
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"process {pid.strip()}{where}"
