"""Rough seconds of one checkpoint's work, estimated before any checkpoint is loaded, so that a
long call over checkpoints warns before it starts (:func:`ihprobe.core.stages.announced_work`).

The size comes from the first checkpoint's files (the values its weights hold, the layers, heads
and context of its ``config.json``); the work from the call's settings; the speed from
:func:`~ihprobe.core.stages.rough_seconds`. A hub revision not yet fetched has no estimate: its
loop warns once its first checkpoint is done instead.

>>> shape_of_checkpoint(Checkpoint("org/not-fetched", revision="step1")) is None
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.stages import rough_seconds
from ihprobe.core.weight_names import weight_files
from ihprobe.io.runs import Checkpoint
from ihprobe.io.validation.build import stored_elements

NAMES = {  # HF's spellings of a config's sizes, the first present wins
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "heads": ("num_attention_heads", "n_head"),
    "context": ("max_position_embeddings", "n_positions", "n_ctx"),
}


def shape_of_checkpoint(ckpt: Checkpoint) -> dict[str, int] | None:
    """``parameters`` (values its weights hold), ``layers``, ``heads`` and ``context`` of a
    checkpoint on disk, read from its files; None where it is not on disk or not readable."""
    path = Path(ckpt.source)
    if ckpt.revision is not None or not path.is_dir():
        return None
    try:
        config = json.loads((path / "config.json").read_text())
        shape = {"parameters": stored_elements(weight_files(path))}
    except (OSError, ValueError, IhprobeError):
        return None
    for key, names in NAMES.items():
        found = [config[n] for n in names if isinstance(config.get(n), int) and config[n] > 0]
        shape[key] = found[0] if found else 1
    return shape


def seconds_each(ckpts: Sequence[Checkpoint], flops, device: str = "cpu") -> float | None:
    """Rough seconds of one checkpoint's work: ``flops(shape)`` of the first checkpoint's
    :func:`shape_of_checkpoint` at :func:`~ihprobe.core.stages.rough_seconds`; None without
    a checkpoint on disk.

    Example:
        >>> seconds_each([], lambda shape: 1e12) is None
        True
    """
    shape = shape_of_checkpoint(ckpts[0]) if ckpts else None
    return None if shape is None else rough_seconds(flops(shape), device)


def forward_flops(shape: dict[str, int], rows: int, groups: int = 1) -> float:
    """Two operations per parameter and token: ``groups`` passes over ``rows`` rows of the
    checkpoint's context.

    >>> forward_flops({"parameters": 10, "context": 4}, rows=2, groups=3)
    480.0
    """
    return 2.0 * shape["parameters"] * rows * shape["context"] * groups
