"""Which files of a checkpoint directory may be read, and whether safetensors headers are sound.

Only regular files inside the directory are read. A symlink is followed only into the ``blobs``
directory of an HF cache repository (``models--org--name/snapshots/REV/x -> ../../blobs/HASH``);
FIFOs, sockets and devices are refused by ``os.stat`` before anything opens them (a FIFO would
block ``open`` forever). Shard indexes may only name files of the directory itself.

>>> check_directory(Path("runs/demo/checkpoints/step-000100"))          # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from ihprobe.core.errors import IhprobeError

MAX_HEADER_BYTES = 100 * 2**20  # the safetensors library's own limit
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
}


def check_directory(path: Path) -> None:
    """Refuse any entry of ``path`` that is not a regular file, a directory or an allowed link
    (and ``path`` itself unless it is a directory)."""
    if not Path(path).is_dir():
        what = "does not exist" if not Path(path).exists() else "is not a directory"
        raise IhprobeError(f"{path} {what}; pass a checkpoint directory (config.json + weights).")
    for entry in sorted(path.iterdir()):
        if entry.is_symlink():
            check_link(entry, path)
            continue
        mode = entry.lstat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise IhprobeError(
                f"{entry} is not a regular file (a FIFO, socket or device); ihprobe reads only "
                "regular files. Remove it from the checkpoint directory."
            )


def check_regular(file: Path) -> None:
    """Refuse ``file`` unless it is a regular file (``os.stat``, so nothing is opened)."""
    if not stat.S_ISREG(file.stat().st_mode):
        raise IhprobeError(f"{file} is not a regular file; ihprobe reads only regular files.")


def check_weight_files(weights: list[Path]) -> None:
    """Each weight file a regular file (nothing opened yet), safetensors with a sound header."""
    for file in weights:
        check_regular(file)
        if file.suffix == ".safetensors":
            safetensors_header(file)


def check_link(entry: Path, directory: Path) -> None:
    """Refuse the link ``entry`` of checkpoint ``directory`` unless it points to a regular file
    in the blobs of the HF cache that ``directory`` is a snapshot of."""
    target = Path(os.path.realpath(entry))
    if not target.exists():
        raise IhprobeError(f"{entry} is a dangling symlink; re-save or re-download the checkpoint.")
    snapshot = Path(os.path.abspath(directory))  # an HF cache's models--org--name/snapshots/REV
    blobs = Path(os.path.realpath(snapshot.parent.parent / "blobs"))
    if target.parent != blobs or snapshot.parent.name != "snapshots":
        raise IhprobeError(
            f"{entry} links to {target}, outside the checkpoint directory; symlinks are followed "
            "only into an HF cache's blobs. Copy the file into the directory instead."
        )
    if not stat.S_ISREG(target.stat().st_mode):
        raise IhprobeError(f"{entry} links to {target}, which is not a regular file.")


def check_shard_indexes(path: Path) -> None:
    """Every file a shard index names must be a plain name of a file in ``path``."""
    for name in SHARD_INDEXES:
        index = path / name
        if not index.is_file():
            continue
        try:
            weight_map = json.loads(index.read_bytes().decode("utf-8"))["weight_map"]
            files = set(weight_map.values())
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
            reason = type(err).__name__
            raise IhprobeError(f"{index} is not a valid shard index ({reason}).") from err
        for file in sorted(map(str, files)):
            if Path(file).name != file or file in ("", ".", ".."):
                raise IhprobeError(
                    f"{index} names {file!r}, outside the checkpoint directory; shards must be "
                    "files of the directory itself."
                )
            if not (path / file).is_file():
                raise IhprobeError(f"{index} names {file}, which is not in {path}.")


def safetensors_header(file: Path) -> dict[str, dict]:
    """The tensor entries of a safetensors file, checked against the file's bytes.

    Every entry needs a known dtype, a shape of non-negative integers, and offsets that hold
    exactly ``prod(shape) * itemsize`` bytes; entries may not overlap and must fill the data.
    """
    try:
        return _parse_header(file)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise IhprobeError(
            f"{file} is corrupt or truncated ({reason}); re-save or re-download it."
        ) from err


def _parse_header(file: Path) -> dict[str, dict]:
    size = file.stat().st_size
    with open(file, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        if n < 2 or n > MAX_HEADER_BYTES or 8 + n > size:
            raise ValueError(f"header length {n} does not fit a file of {size} bytes")
        header = json.loads(fh.read(n).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"the header is a JSON {type(header).__name__}, not an object")
    meta = header.pop("__metadata__", None)
    if meta is not None and not (
        isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())
    ):
        raise ValueError("__metadata__ must map names to strings")
    end = 0
    for name, entry in sorted(header.items(), key=lambda kv: _begin(kv[1])):
        begin, stop = _entry_span(name, entry)
        if begin != end:
            raise ValueError(f"tensor {name} starts at byte {begin}, not {end} (overlap or gap)")
        end = stop
    if 8 + n + end != size:
        raise ValueError(f"tensor data ends at byte {8 + n + end} but the file has {size}")
    return header


def _begin(entry) -> int:
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    return offsets[0] if isinstance(offsets, list) and offsets and _is_int(offsets[0]) else -1


def _entry_span(name: str, entry) -> tuple[int, int]:
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise ValueError(f"tensor {name} needs exactly dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"tensor {name} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
        raise ValueError(f"tensor {name} has shape {shape!r}, not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))):
        raise ValueError(f"tensor {name} has data_offsets {offsets!r}, not two integers")
    begin, stop = offsets
    expected = math.prod(shape) * DTYPE_BYTES[dtype]
    if begin < 0 or stop - begin != expected:
        raise ValueError(
            f"tensor {name} ({dtype} {shape}) needs {expected} bytes but its offsets "
            f"{offsets} hold {stop - begin}"
        )
    return begin, stop


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
