"""The model a config will build, checked before it is built: as transformers fills it in.

``config.json`` may leave out what transformers fills in with its own defaults: a config saying
only ``"model_type": "llama"`` builds a 32-layer, 4096-wide Llama (26 GB), whatever the weights
beside it hold. So the schema of :mod:`ihprobe.io.validation.config` runs again on the config
as transformers reads it (defaults included), the model is built on the ``meta`` device (no
memory) to count its parameters exactly, and that count is compared with the weights on disk
(a model far larger than its weights cannot be theirs) and with the memory available.

>>> check_build(path, AutoConfig.from_pretrained(path), weight_files(path))   # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import check_memory
from ihprobe.io.validation.config import check_config
from ihprobe.io.validation.files import safetensors_header
from ihprobe.io.validation.tensors import hf_loading

# A model with more parameters than this times the weights' elements cannot be built from them.
MISMATCH_FACTOR = 2
MISMATCH_SLACK = 4096  # elements: a few small tensors HF creates (norm weights, biases)


def check_build(
    path: Path,
    config,
    weights: list[Path],
    dtype: torch.dtype = torch.float32,
    *,
    trust_remote_code: bool = False,
    in_memory: bool = True,
) -> int:
    """Refuse ``config`` (an HF config of the checkpoint at ``path``) when the model it builds
    breaks the schema, does not match ``weights`` or does not fit in memory (unless not
    ``in_memory``: a device map's capacity is checked by :mod:`ihprobe.io.offload`); return its
    parameter count.

    Example:
        >>> check_build(ckpt, config, weight_files(ckpt))                    # doctest: +SKIP
        161728
    """
    where = f"{path}/config.json (with transformers' defaults filled in)"
    check_config(config.to_dict(), where)
    parameters = meta_parameters(path, config, trust_remote_code)
    stored = stored_elements(weights)
    if parameters > MISMATCH_FACTOR * stored + MISMATCH_SLACK:
        raise IhprobeError(
            f"{path}: config.json describes a {config.model_type} model of {parameters:.3g} "
            f"parameters but the weights hold {stored:.3g} values: the config does not match "
            "the weights; save them together with save_pretrained."
        )
    itemsize = torch.empty((), dtype=dtype, device="cpu").element_size()
    if in_memory:
        what = f"building {path} ({parameters:.3g} parameters in {dtype})"
        check_memory(what, parameters * itemsize)
    return parameters


def meta_parameters(path: Path, config, trust_remote_code: bool = False) -> int:
    """Parameters of the model ``config`` builds, counted on the meta device (no memory)."""
    with warnings.catch_warnings(), hf_loading(path), torch.device("meta"):
        warnings.simplefilter("ignore")
        skeleton = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    return sum(p.numel() for p in skeleton.parameters())


def stored_elements(weights: list[Path]) -> int:
    """Values stored in ``weights``: from safetensors headers, bounded by bytes for pickles."""
    total = 0
    for file in weights:
        if file.suffix == ".safetensors":
            total += sum(math.prod(e["shape"]) for e in safetensors_header(file).values())
        else:
            total += file.stat().st_size  # at least one byte per stored value
    return total
