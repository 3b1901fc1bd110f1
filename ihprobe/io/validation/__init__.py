"""One validation layer for checkpoints, run at the boundary before anything is built.

:func:`check_checkpoint` runs before a model is allocated: the directory's files, the config
schema, every safetensors header, shard indexes, and the finiteness of every tensor.
:func:`check_loaded` runs on the HF model just built: nothing missing, unexpected or of
another shape, and a causal model. Every failure is an :class:`~ihprobe.core.errors.IhprobeError`
with one line saying what is wrong.

>>> raw_config = check_checkpoint(ckpt, weight_files(ckpt))              # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ihprobe.io.validation import config, files, tensors
from ihprobe.io.validation.numerics import check_scores, require_finite
from ihprobe.io.validation.tensors import hf_loading

__all__ = [
    "check_scores",
    "hf_loading",
    "require_finite",
    "check_checkpoint",
    "check_loaded",
]


def check_checkpoint(
    path: Path,
    weights: list[Path],
    *,
    size_limits: bool | None = None,
    finite: bool = True,
    kind: Callable[[dict], object] | None = None,
) -> dict:
    """Check a checkpoint directory before loading it; return its parsed ``config.json``.

    Args:
        path: the checkpoint directory (``config.json`` + weights).
        weights: its weight files that will be read (``ihprobe.io.models.weight_files``).
        size_limits: refuse configs over the size limits of :mod:`ihprobe.io.validation.config`;
            default on unless ``IHPROBE_NO_SIZE_LIMITS=1`` is set in the environment.
        finite: read every tensor to check it is finite; False when the caller has already
            read and checked them (``ihprobe.io.tensor_reads.read_checkpoint``).
        kind: a check of the parsed config's architecture, run before any other check of it
            (an architecture ihprobe cannot probe is named first, whatever else is off).

    Example:
        >>> check_checkpoint(ckpt, weight_files(ckpt))["model_type"]  # doctest: +SKIP
        'gpt_neox'
    """
    path = Path(path)
    files.check_directory(path)
    raw = config.read_config(path / "config.json")
    if kind is not None:
        kind(raw)
    config.check_config(raw, str(path / "config.json"), size_limits=size_limits)
    files.check_shard_indexes(path)
    files.check_weight_files(weights)
    if finite:
        tensors.check_finite_files(weights)
    return raw


def check_loaded(path: Path, hf_model, info: dict) -> None:
    """Check the HF model built from ``path`` (``info`` from ``output_loading_info=True``):
    every tensor loaded, none unexpected or reshaped, float weights stored as floats, causal."""
    tensors.check_loading_info(Path(path), info)
    tensors.check_dtypes(sorted(Path(path).glob("*.safetensors")), hf_model)
    tensors.check_causal(hf_model, Path(path))
