"""One skeleton, many checkpoints: copy another checkpoint's weights into a loaded model instead
of building a new one (a sweep over a run's checkpoints builds its model once).

>>> model = ihprobe.load("runs/demo/main/checkpoints/step-000000")      # doctest: +SKIP
>>> model = load_or_swap(model, "runs/demo/main/checkpoints/step-000500")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.generalized_components.joint_qkv_attention import (
    JointQKVAttentionBridge,
)
from transformers.initialization import no_init_weights

from ihprobe.core.errors import IhprobeError
from ihprobe.io import models  # models.load: one name to load by (and to patch in tests)
from ihprobe.io.models import (
    LOADED,
    build_hf_model,
    model_name,
    release_offload,
    validate_checkpoint,
)
from ihprobe.io.offload import is_dispatched, refuse_dispatched
from ihprobe.io.provenance import Provenance
from ihprobe.io.runs import checkpoint_meta
from ihprobe.io.sources import causal_lm_config, resolve
from ihprobe.io.tensor_reads import ReadCheckpoint
from ihprobe.io.validation import check_checkpoint
from ihprobe.io.weights import (
    has_safetensors,
    read_state_dict,
    weight_files,
)

# tensor names on disk that HF renames when it loads them (GPT-NeoX/Pythia's output layer)
SAVED_NAMES = {"embed_out.weight": "lm_head.weight"}
CONFIG_NAMES = ("_name_or_path", "transformers_version")  # config keys that name, not shape


def load_weights(
    model: TransformerBridge,
    source: str | os.PathLike,
    *,
    revision: str | None = None,
    read: ReadCheckpoint | None = None,
) -> None:
    """Copy the weights of another checkpoint into an already loaded ``model``, in place.

    Sweeping the checkpoints of one run this way reuses one skeleton instead of rebuilding the
    model per checkpoint. The checkpoint must have the same architecture and shapes, and
    ``model`` must come from :func:`load` with ``processing="none"``; it then goes by the new
    checkpoint's name, as :func:`load` would name it. ``read``: the checkpoint's tensors
    already read and checked (:func:`ihprobe.io.weights.read_checked`, e.g. by a prefetching
    sweep), so no tensor is read again.
    """
    refuse_dispatched(model, "load_weights (one skeleton re-filled with each checkpoint)")
    loaded = LOADED.get(model)
    if loaded is None or getattr(model, "compatibility_mode", False):
        raise IhprobeError(
            "load_weights needs a model from ihprobe.load(..., processing='none'); "
            "load the checkpoint with ihprobe.load instead."
        )
    path = read.path if read is not None else resolve(source, revision=revision)
    if read is None:
        validate_checkpoint(path)
    else:  # read_checked: files checked, tensors checked finite as they were read
        check_checkpoint(path, weight_files(path), finite=False)
    config = causal_lm_config(path)
    _check_same_config(model, path, config)
    targets = loaded.hf_tensors
    state = _state_for(targets, path, config, model.cfg.dtype, read)
    mismatched = sorted(k for k in targets if k not in state or state[k].shape != targets[k].shape)
    if mismatched:
        raise IhprobeError(
            f"{path} does not match the loaded model's architecture (tensors {mismatched[:3]} "
            "missing or of another shape); load it with ihprobe.load instead."
        )
    meta = checkpoint_meta(path)
    swap_weights(model, state, revision=revision, step=meta.get("step"), tokens=meta.get("tokens"))
    # named as ihprobe.load names it: results of the swapped-in model name their own checkpoint
    loaded.provenance = dataclasses.replace(loaded.provenance, model=model_name(source, path))


def swap_weights(
    model: TransformerBridge,
    state: dict[str, torch.Tensor],
    *,
    revision: str | None = None,
    step: int | None = None,
    tokens: int | None = None,
) -> None:
    """Copy an HF state dict of the model's own architecture (e.g. a training model's
    ``state_dict()``) into ``model`` from :func:`load`, in place, reading no file; ``step`` and
    ``tokens`` become its provenance. Tensors the model lacks are ignored.

    Example:
        >>> swap_weights(model, hf_model.state_dict(), step=400)        # doctest: +SKIP
    """
    refuse_dispatched(model, "swap_weights (copying weights into the model)")
    loaded = LOADED.get(model)
    if loaded is None:
        raise IhprobeError("swap_weights needs a model from ihprobe.load(..., processing='none').")
    targets = loaded.hf_tensors
    with torch.no_grad():
        for name, tensor in state.items():
            if name in targets:
                targets[name].copy_(tensor)
    _resplit_fused_qkv(model)
    loaded.provenance = Provenance(loaded.provenance.model, revision, step, tokens)


def _state_for(targets: dict[str, torch.Tensor], path: Path, config, dtype: torch.dtype, read=None):
    """The checkpoint's tensors under the names of ``targets``: read straight from its
    safetensors (or taken from ``read``) when they carry those names and shapes (no model is
    built), else through HF, which also maps old tensor names and ties shared weights."""
    if read is not None or has_safetensors(path):
        state = dict(read.state) if read is not None else read_state_dict(path)
        for saved, name in SAVED_NAMES.items():
            if saved in state and name not in state:
                state[name] = state.pop(saved)
        if all(k in state and state[k].shape == t.shape for k, t in targets.items()):
            return state
    return build_hf_model(path, config, dtype).state_dict()


def _check_same_config(model: TransformerBridge, path: Path, config) -> None:
    """Raise unless ``config`` describes the same architecture as ``model``'s."""
    current, wanted = model.original_model.config.to_dict(), config.to_dict()
    differ = sorted(
        k
        for k in set(current) | set(wanted)
        if k not in CONFIG_NAMES and current.get(k) != wanted.get(k)
    )
    if differ:
        raise IhprobeError(
            f"{path} has another architecture than the loaded model (config differs in "
            f"{', '.join(differ[:5])}); load it with ihprobe.load instead."
        )


def load_or_swap(
    model: TransformerBridge | None,
    source: str | os.PathLike,
    *,
    revision: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    read: ReadCheckpoint | None = None,
    placement: dict | None = None,
) -> TransformerBridge:
    """``source`` as a hooked model, reusing ``model``'s skeleton when it can.

    With no ``model`` (None), or one of another architecture, this is :func:`load`; otherwise
    the weights of ``source`` are copied into ``model`` (:func:`load_weights`, from ``read``
    when the tensors were read already). Sweeping a run with it builds the model once.
    ``device`` and ``dtype`` are those of a freshly loaded model; ``placement`` its device map
    (``device_map``, ``max_memory``, ``offload_folder`` of :func:`ihprobe.io.models.load`),
    under which every checkpoint is loaded afresh (a dispatched model is never re-filled; the
    previous one's offload files are removed first).

    Example:
        >>> model = None
        >>> for ckpt in checkpoints("runs/demo/main"):                  # doctest: +SKIP
        ...     model = load_or_swap(model, ckpt.source)
    """
    if model is not None and is_dispatched(model):
        release_offload(model)
    elif model is not None and not placement:
        try:
            load_weights(model, source, revision=revision, read=read)
            return model
        except IhprobeError:  # another architecture, or not a swappable model: load afresh
            pass
    return models.load(source, revision=revision, device=device, dtype=dtype, **(placement or {}))


def _resplit_fused_qkv(model: TransformerBridge) -> None:
    """Fused-QKV bridges (GPT-NeoX) keep q/k/v as copies made at boot: make them again.

    The bridge builds fresh ``nn.Linear`` modules for the copies; their random initialisation
    is skipped (the split weights replace it at once).
    """
    with no_init_weights():
        for module in model.modules():
            if isinstance(module, JointQKVAttentionBridge):
                module.set_original_component(module.original_component)
