"""Reading a checkpoint one named tensor at a time, hashing each tensor as it is read.

A :class:`TensorReader` opens a checkpoint's safetensors files (one or many shards) and reads
only the tensors asked for (``safe_open(...).get_tensor``), never a whole file; it records which
tensors it read, checks each for NaN/inf, and hashes each one (SHA-256 of its name, dtype, shape
and bytes) while it is in memory. :func:`read_checkpoint` reads every tensor that way, once:
the state dict, the per-tensor digests and the weights hash (SHA-256 over the per-tensor
digests, so file layout and sharding do not matter) come from one pass over the bytes.

The digests are cached (``$IHPROBE_CACHE/digests``) under the identity of the weight files: an
HF cache blob is named by the SHA-256 of its bytes; a local file by its path, size, inode and
modification time. A checkpoint hashed once is not read again to be hashed.

>>> import tempfile
>>> from safetensors.torch import save_file
>>> ckpt = Path(tempfile.mkdtemp())
>>> save_file({"a": torch.ones(2), "b": torch.zeros(3)}, ckpt / "model.safetensors")
>>> reader = TensorReader(ckpt)
>>> reader.get("b").tolist(), reader.read
([0.0, 0.0, 0.0], ['b'])
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from ihprobe.core import cache
from ihprobe.core.errors import IhprobeError
from ihprobe.io.validation.files import safetensors_header
from ihprobe.io.validation.numerics import all_finite

HEX64 = re.compile("[0-9a-f]{64}")
DIGESTS = "digests"  # cache folder: file identity -> per-tensor digests
Where = bool | str | os.PathLike | None  # a cache root as ihprobe.core.cache.root takes it


def tensor_digest(name: str, tensor: torch.Tensor) -> str:
    """SHA-256 of a tensor's name, dtype, shape and bytes.

    >>> tensor_digest("w", torch.zeros(2)) == tensor_digest("w", torch.zeros(2, dtype=torch.half))
    False
    """
    t = tensor.detach().contiguous().cpu()
    digest = hashlib.sha256(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        digest.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()


def whole_digest(tensors: dict[str, str]) -> str:
    """The weights hash: SHA-256 over the sorted ``name:digest`` lines of every tensor."""
    lines = "".join(f"{name}:{tensors[name]}\n" for name in sorted(tensors))
    return hashlib.sha256(lines.encode()).hexdigest()


@dataclass
class Digests:
    """Per-tensor SHA-256 digests of (part of) a checkpoint, the file holding each tensor, and
    the weights hash once every tensor is hashed (None before)."""

    tensors: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # tensor name -> weight file name
    whole: str | None = None

    def shards(self) -> dict[str, list[str]]:
        """Weight file name -> the tensors it holds (sorted)."""
        found: dict[str, list[str]] = {}
        for name in sorted(self.files):
            found.setdefault(self.files[name], []).append(name)
        return found


class TensorReader:
    """The tensors of one checkpoint directory's safetensors, read by name, one at a time.

    ``read`` lists the names read so far (in order), ``digests`` their SHA-256 (hashed while
    read). Every tensor read is checked for NaN/inf (``finite``).
    """

    def __init__(self, path: str | os.PathLike, *, finite: bool = True):
        self.path, self.finite = Path(path), finite
        self.files = sorted(self.path.glob("*.safetensors"))
        if not self.files:
            raise IhprobeError(
                f"{self.path} has no *.safetensors; reading tensors by name needs safetensors "
                "(re-save the checkpoint with save_pretrained(safe_serialization=True))."
            )
        self.where: dict[str, Path] = {}
        self.headers: dict[str, dict] = {}
        for file in self.files:
            for name, entry in safetensors_header(file).items():
                self.where[name], self.headers[name] = file, entry
        self.read: list[str] = []
        self.digests = Digests(files={n: f.name for n, f in self.where.items()})
        self._handles: dict[Path, object] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self.where)

    def nbytes(self, names=None) -> int:
        """Bytes of the named tensors (all by default) as stored."""
        chosen = self.where if names is None else names
        return sum(int(e[1]) - int(e[0]) for e in (self.headers[n]["data_offsets"] for n in chosen))

    def get(self, name: str) -> torch.Tensor:
        """Tensor ``name`` (hashed and checked as it is read)."""
        file = self.where.get(name)
        if file is None:
            raise IhprobeError(f"{self.path} holds no tensor named {name}.")
        if file not in self._handles:
            try:
                self._handles[file] = safe_open(str(file), framework="pt")
            except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
                raise IhprobeError(f"{file} is corrupt or truncated ({err}).") from err
        tensor = self._handles[file].get_tensor(name)
        if self.finite and tensor.is_floating_point() and not all_finite(tensor):
            bad = int((~torch.isfinite(tensor)).sum())
            raise IhprobeError(
                f"{file}: tensor {name} has {bad} NaN/inf value{'s' * (bad > 1)}; the weights "
                "are broken (diverged training or a corrupt file): use another checkpoint."
            )
        self.read.append(name)
        self.digests.tensors[name] = tensor_digest(name, tensor)
        return tensor

    def close(self) -> None:
        self._handles.clear()


@dataclass
class ReadCheckpoint:
    """Every tensor of a checkpoint read once: the state dict, its digests, its weights hash."""

    path: Path
    state: dict[str, torch.Tensor]
    digests: Digests

    @property
    def weights_hash(self) -> str:
        return self.digests.whole

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.state.values())


def read_checkpoint(
    path: str | os.PathLike, *, finite: bool = True, in_cache: Where = True
) -> ReadCheckpoint:
    """Every tensor of a safetensors checkpoint, each read, checked and hashed once; the
    digests are remembered (:func:`remember`) in ``in_cache`` (a cache root as
    :func:`ihprobe.core.cache.root` takes it; False: nowhere)."""
    reader = TensorReader(path, finite=finite)
    state = {name: reader.get(name) for name in reader.names}
    reader.close()
    reader.digests.whole = whole_digest(reader.digests.tensors)
    remember(reader.path, reader.digests, in_cache)
    return ReadCheckpoint(reader.path, state, reader.digests)


# ----------------------------------------------------------------------------- the digest cache


def file_identity(file: Path) -> str:
    """What names a weight file's bytes: the blob's SHA-256 for a file in an HF cache (its
    ``blobs/<sha256>`` name), else its real path, size, inode and modification time."""
    real = Path(os.path.realpath(file))
    if real.parent.name == "blobs" and HEX64.fullmatch(real.name):
        return f"blob:{real.name}"
    st = real.stat()
    return f"file:{real}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}"


def _entry(path: Path, in_cache: Where = True) -> Path | None:
    where = cache.root(in_cache)
    files = sorted(Path(path).glob("*.safetensors"))
    if where is None or not files:
        return None
    spec = {f.name: file_identity(f) for f in files}
    return where / DIGESTS / f"{cache.key(spec)}.json"


def cached_digests(path: str | os.PathLike, in_cache: Where = True) -> Digests | None:
    """The digests remembered for the weight files of ``path`` as they are now, or None."""
    entry = _entry(Path(path), in_cache)
    found = cache.read(entry, _checked) if entry is not None else None
    return Digests(**found) if found is not None else None


def digests_of(whole: str, in_cache: Where = True) -> Digests | None:
    """The per-tensor digests of the checkpoint whose weights hash is ``whole``, when remembered
    (a series whose scans are cached finds repeated tensors without the weights on disk)."""
    where = cache.root(in_cache)
    found = (
        cache.read(where / DIGESTS / "by-hash" / f"{whole[:32]}.json", _checked) if where else None
    )
    return Digests(**found) if found is not None and found["whole"] == whole else None


def remember(path: str | os.PathLike, digests: Digests, in_cache: Where = True) -> None:
    """Store ``digests`` (merged with what was stored before) for the weight files of ``path``,
    and, once complete, under the weights hash too (:func:`digests_of`)."""
    entry = _entry(Path(path), in_cache)
    if entry is None:
        return
    if digests.whole is not None:
        value = {"tensors": digests.tensors, "files": digests.files, "whole": digests.whole}
        by_hash = entry.parent / "by-hash" / f"{digests.whole[:32]}.json"
        if not by_hash.is_file():
            cache.write(by_hash, value)
    known = cached_digests(path, in_cache) or Digests()
    tensors = {**known.tensors, **digests.tensors}
    whole = digests.whole or known.whole
    value = {"tensors": tensors, "files": {**known.files, **digests.files}, "whole": whole}
    if value != {"tensors": known.tensors, "files": known.files, "whole": known.whole}:
        cache.write(entry, value)


def _checked(value) -> dict:
    if not isinstance(value, dict) or set(value) != {"tensors", "files", "whole"}:
        raise ValueError("not a digests entry")
    tensors, files, whole = value["tensors"], value["files"], value["whole"]
    if not all(isinstance(d, str) and HEX64.fullmatch(d) for d in tensors.values()):
        raise ValueError("a tensor digest is not a SHA-256")
    if whole is not None and not (isinstance(whole, str) and HEX64.fullmatch(whole)):
        raise ValueError("the weights hash is not a SHA-256")
    if not all(isinstance(f, str) for f in files.values()):
        raise ValueError("a file name is not a string")
    return {"tensors": dict(tensors), "files": dict(files), "whole": whole}
