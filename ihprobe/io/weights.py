"""The weights of a checkpoint on disk: which files, read without running anything, checked.

Safetensors are read as data; ``.bin``/``.pt`` only through ``torch.load(weights_only=True)``,
which refuses a pickle that would run code. A trainer checkpoint's ``ihprobe.json`` records the
SHA-256 of each file that decides the numbers (format 2: the config, the tokenizer files and the
weights; format 1, older checkpoints without a ``format`` field: the weights only), and
:func:`verify_checksums` compares them.

>>> weights_hash("runs/demo/checkpoints/step-000000")[:8]             # doctest: +SKIP
'3f9a0c1e'
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import load_file

from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import sha256_file
from ihprobe.core.weight_names import weight_files  # by name, torch-free
from ihprobe.io.runs import Checkpoint, checkpoint_meta
from ihprobe.io.sources import resolve
from ihprobe.io.tensor_reads import (
    ReadCheckpoint,
    Where,
    cached_digests,
    read_checkpoint,
    tensor_digest,
    whole_digest,
)
from ihprobe.io.validation.files import (
    check_directory,
    check_link,
    check_regular,
    check_weight_files,
)

CHECKSUM_FORMAT = 2  # ihprobe.json "format": 2 hashes the config and tokenizer files too
# Files besides the weights whose edits change what a checkpoint computes or how text is read.
DECISIVE = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
)


def has_safetensors(path: Path) -> bool:
    return any(path.glob("*.safetensors"))


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint, read without executing anything from it."""
    state: dict[str, torch.Tensor] = {}
    for file in weight_files(path):
        state.update(_read_file(file))
    return state


def _read_file(file: Path) -> dict[str, torch.Tensor]:
    if file.suffix == ".safetensors":
        try:
            return load_file(str(file))
        except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
            raise IhprobeError(
                f"{file} is corrupt or truncated ({err}); re-save or re-download it."
            ) from err
    try:
        state = torch.load(str(file), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - UnpicklingError and friends
        raise IhprobeError(
            f"refused to load {file}: it is not a plain tensor file and unpickling it could run "
            f"code ({type(err).__name__}). Convert it to safetensors from a trusted environment."
        ) from err
    if not isinstance(state, dict):
        raise IhprobeError(f"{file} does not hold a state dict (found {type(state).__name__}).")
    return state


def weights_hash(source: str | os.PathLike | Path) -> str:
    """SHA-256 over the per-tensor digests (name, dtype, shape and values of each tensor; file
    layout and sharding do not matter), remembered under the weight files' identity
    (:mod:`ihprobe.io.tensor_reads`), so a checkpoint is read to be hashed once.

    The files are checked first (regular files inside the checkpoint, safetensors headers,
    the checksums ``ihprobe.json`` recorded), so a FIFO, a link out of the checkpoint or an
    edited file is refused before anything is read.
    """
    path = resolve(source)
    check_files(path)
    if not has_safetensors(path):
        state = read_state_dict(path)
        return whole_digest({name: tensor_digest(name, t) for name, t in state.items()})
    known = cached_digests(path)
    if known is not None and known.whole is not None:
        return known.whole
    return read_checkpoint(path, finite=False).weights_hash


def read_checked(path: str | os.PathLike, in_cache: Where = True) -> ReadCheckpoint:
    """Every tensor of a safetensors checkpoint directory, read once (checked finite and hashed,
    :func:`ihprobe.io.tensor_reads.read_checkpoint`) after its files pass :func:`check_files`:
    what :func:`ihprobe.io.swap.load_weights` takes as ``read`` without reading or checking the
    files again. The digests are remembered in ``in_cache`` (False: nowhere)."""
    path = Path(path)
    check_files(path)
    return read_checkpoint(path, in_cache=in_cache)


def identical_checkpoints(sources) -> list[tuple[str, str]]:
    """Pairs (earlier, later) of checkpoints whose weights are identical.

    Published checkpoint series sometimes save the same weights under two steps; a trajectory
    through them would show a flat segment that training never produced.
    """
    first_seen: dict[str, str] = {}
    pairs = []
    for src in sources:
        key = weights_hash(src.source if isinstance(src, Checkpoint) else src)
        name = src.source if isinstance(src, Checkpoint) else str(src)
        if key in first_seen:
            pairs.append((first_seen[key], name))
        else:
            first_seen[key] = name
    return pairs


def weight_checksums(path: str | os.PathLike) -> dict[str, str]:
    """File name -> SHA-256 of each weight file of a checkpoint directory.

    Example:
        >>> import tempfile
        >>> from safetensors.torch import save_file
        >>> ckpt = Path(tempfile.mkdtemp())
        >>> save_file({"w": torch.ones(2)}, ckpt / "model.safetensors")
        >>> {name: len(digest) for name, digest in weight_checksums(ckpt).items()}
        {'model.safetensors': 64}
    """
    return {file.name: sha256_file(file) for file in weight_files(Path(path))}


def checkpoint_checksums(path: str | os.PathLike) -> dict[str, str]:
    """File name -> SHA-256 of every file of a checkpoint that decides its numbers: the weights,
    the config and the tokenizer files (what ``ihprobe.json`` format 2 records)."""
    path = Path(path)
    decisive = {name: sha256_file(path / name) for name in DECISIVE if (path / name).is_file()}
    return {**decisive, **weight_checksums(path)}


def check_files(path: Path) -> list[Path]:
    """The weight files of ``path`` once their type, headers and checksums pass; every reader
    of a checkpoint's weights goes through this or :func:`ihprobe.io.models.validate_checkpoint`.
    """
    check_directory(path)  # FIFOs, devices, links out of the checkpoint
    files = weight_files(path)
    check_weight_files(files)
    verify_checksums(path)
    return files


def verify_checksums(path: str | os.PathLike) -> None:
    """Raise naming the file whose SHA-256 differs from the one ``ihprobe.json`` recorded.

    Checkpoints without recorded checksums (not written by ihprobe's trainer) pass; those of
    format 1 (no ``format`` field, the weights alone recorded) are checked on their weights; from
    format 2 on, a config or tokenizer file present but not recorded is refused too.
    """
    meta = checkpoint_meta(path)
    recorded = meta.get("sha256") or {}  # names and digests well formed
    if meta.get("format", 1) >= CHECKSUM_FORMAT:
        added = [n for n in DECISIVE if (Path(path) / n).exists() and n not in recorded]
        if added:
            raise IhprobeError(
                f"{Path(path) / added[0]} is not recorded in {path}/ihprobe.json, which hashes "
                "every file that decides the numbers: it was added later; remove it or re-save."
            )
    for name, expected in sorted(recorded.items()):
        file = Path(path) / name
        if not file.is_file():
            raise IhprobeError(f"{file} is missing but {path}/ihprobe.json records it; re-save it.")
        if file.is_symlink():  # allowed only into the blobs of the HF cache it is a snapshot of
            check_link(file, Path(path))
        check_regular(file)  # never open a FIFO or a device
        if sha256_file(file) != expected:
            raise IhprobeError(
                f"{file} does not match the SHA-256 recorded in ihprobe.json when it was written: "
                "the file changed or is corrupt; re-save or restore it."
            )
