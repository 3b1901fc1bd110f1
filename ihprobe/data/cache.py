"""Where producers keep what is expensive to rebuild: token streams, tokenizers, Markov matrices.

The root is ``$IHPROBE_CACHE`` when set, else ``~/.cache/ihprobe``. Entries are keyed by a hash
of everything that determines them, and written atomically (temp directory + rename), so two
processes building the same entry never see half of it.

>>> key({"source": "default", "vocab_size": 512})
'4571a7af4e22d413'
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_directory


def root() -> Path:
    """The cache root directory (created on demand)."""
    path = Path(os.environ.get("IHPROBE_CACHE") or Path.home() / ".cache" / "ihprobe")
    path.mkdir(parents=True, exist_ok=True)
    return path


def key(spec: dict) -> str:
    """A short stable hash of a JSON-serialisable spec."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry(kind: str, spec: dict, build: Callable[[Path], None]) -> Path:
    """The directory of cache entry ``kind/key(spec)``, calling ``build(tmpdir)`` when missing."""
    final = root() / kind / key(spec)
    if final.is_dir():
        return final
    try:
        with atomic_directory(final) as tmp:
            build(tmp)
            (tmp / "spec.json").write_text(json.dumps(spec, sort_keys=True, default=str, indent=1))
    except IhprobeError:
        if not final.is_dir():  # a real failure, not a concurrent writer that won the race
            raise
    return final
