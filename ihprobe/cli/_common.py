"""Helpers that several subcommands share (not a subcommand: the name starts with '_')."""

from __future__ import annotations

from pathlib import Path

from ihprobe.errors import IhprobeError


def refuse_overwrite(targets: list[Path], force: bool) -> None:
    """Raise unless none of ``targets`` exists or ``force`` was given."""
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise IhprobeError(
            f"{', '.join(existing)} already exist; pass --force to overwrite or another --out."
        )


def read_text_option(path: str | None) -> str | None:
    """The contents of a ``--text FILE`` option, or None when it was not given."""
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise IhprobeError(f"cannot read --text {path}: {err.strerror}.") from err


def write_csv(frame, path: Path) -> None:
    """Write ``frame`` to ``path`` atomically (aside, then renamed), creating its directory."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)
