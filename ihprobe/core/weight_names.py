"""Which files of a checkpoint directory hold its weights, by name alone (no torch, no read), so
that the command line refuses a folder without weights before any heavy import.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "model.safetensors").write_bytes(b"")
>>> [f.name for f in weight_files(folder)]
['model.safetensors']
"""

from __future__ import annotations

from pathlib import Path

from ihprobe.core.errors import IhprobeError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth")


def weight_files(path: Path) -> list[Path]:
    """The checkpoint's weight files: safetensors when present, else pickled state dicts."""
    safes = sorted(path.glob("*.safetensors"))
    if safes:
        return safes
    pickles = sorted(p for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if not pickles:
        raise IhprobeError(
            f"{path} has no weights: looked for *.safetensors, *.bin, *.pt. "
            "Save the model with save_pretrained()."
        )
    return pickles
