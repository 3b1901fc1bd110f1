"""The schema of a trainer checkpoint's ``ihprobe.json``: checked whenever it is read.

Its ``step`` and ``tokens`` order checkpoints and label results, and its ``sha256`` names the
weight files to hash and compare; a malformed field (a string step, a checksum that is not 64
hex digits, a file name with ``../`` that would hash a file outside the checkpoint) is one line
naming the file and the field, never a traceback or a file read outside the checkpoint.

>>> check_meta(Path("ihprobe.json"), {"step": 10, "sha256": {"model.safetensors": "0" * 64}})
{'step': 10, 'sha256': {'model.safetensors': '0000000000000000000000000000000000000000000000000000000000000000'}}
>>> check_meta(Path("ihprobe.json"), {"sha256": {"../x": "0" * 64}})     # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: ihprobe.json: sha256 names '../x', not a file of the checkpoint ...
"""  # noqa: E501

from __future__ import annotations

import re
from pathlib import Path

from ihprobe.core.errors import IhprobeError

SHA256 = re.compile(r"[0-9a-f]{64}")
COUNTS = ("step", "tokens", "format")  # non-negative integers (or absent/null)


def check_meta(file: Path, meta) -> dict:
    """``meta`` (the parsed ``file``) when every field ihprobe reads is well formed."""
    fix = "re-save the checkpoint or restore ihprobe.json."
    if not isinstance(meta, dict):
        raise IhprobeError(f"{file} holds a JSON {type(meta).__name__}, not an object; {fix}")
    for key in COUNTS:
        value = meta.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise IhprobeError(
                f"{file}: {key} must be a non-negative integer (got {value!r}); {fix}"
            )
    sums = meta.get("sha256")
    if sums is None:
        return meta
    if not isinstance(sums, dict):
        raise IhprobeError(f"{file}: sha256 must map file names to checksums; {fix}")
    for name, digest in sums.items():
        if Path(name).name != name or name in ("", ".", ".."):
            raise IhprobeError(
                f"{file}: sha256 names {name!r}, not a file of the checkpoint directory; {fix}"
            )
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise IhprobeError(
                f"{file}: the sha256 of {name} is {digest!r}, not 64 hex digits; {fix}"
            )
    return meta


EXTENSION_FIELDS = ("from_steps", "to_steps", "from_tokens", "to_tokens")


def check_run_meta(file: Path, meta: dict) -> dict:
    """``meta`` (a run's parsed ``run.json``) when the fields a resume reads are well formed:
    ``steps`` a count, ``checkpoint_steps`` a list of counts, ``extensions`` a list of
    objects whose from/to fields are counts.

    >>> check_run_meta(Path("run.json"), {"config": {}, "extensions": ["x"]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: run.json: extensions[0] must be an object of from_steps, ...
    """
    fix = "restore run.json or start a new --out."

    def count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if "steps" in meta and not count(meta["steps"]):
        raise IhprobeError(f"{file}: steps must be a non-negative integer; {fix}")
    listed = meta.get("checkpoint_steps", [])
    if not isinstance(listed, list) or not all(count(s) for s in listed):
        raise IhprobeError(f"{file}: checkpoint_steps must be a list of updates; {fix}")
    extensions = meta.get("extensions") or []
    if not isinstance(extensions, list):
        raise IhprobeError(f"{file}: extensions must be a list; {fix}")
    for i, entry in enumerate(extensions):
        if not isinstance(entry, dict) or not all(count(entry.get(k)) for k in EXTENSION_FIELDS):
            raise IhprobeError(
                f"{file}: extensions[{i}] must be an object of {', '.join(EXTENSION_FIELDS)} "
                f"as non-negative integers (got {entry!r:.60}); {fix}"
            )
    return meta
