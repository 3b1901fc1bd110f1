"""Whatever model a user holds, as the hooked model every public function runs on.

:func:`as_model` is the one conversion every public entry point (``scan``, ``ablate``,
``head_effects``, ``composition``, ``patch``, ``attribution_patch``, ``path_patch``,
``loss_by_position``, ``attention_viewer``) applies to its ``model`` argument: a TransformerLens
model is used as it is, a checkpoint path or hub id is loaded (:func:`ihprobe.io.models.load`),
and a plain HF ``PreTrainedModel`` is bridged: a copy of it, built once per object and given
its current weights at every call, so the user's own model is never rewired or changed. A HF
model dispatched by a device map (``from_pretrained(device_map=...)``) is bridged in place:
copying it would hold all its weights in memory at once, and moving it is what accelerate
refuses. :func:`load` is ``ihprobe.load``: a path or hub id, or a HF object (``copy=False``
bridges the object itself).

>>> hf = AutoModelForCausalLM.from_pretrained("gpt2")                       # doctest: +SKIP
>>> ihprobe.scan(hf).top_heads("prefix_matching", 3)                        # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
import weakref
from copy import deepcopy
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge
from transformers import PreTrainedModel

from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.io import models
from ihprobe.io.attention import LOAD_ATTENTION
from ihprobe.io.models import bridge, remember
from ihprobe.io.offload import first_device, is_dispatched
from ihprobe.io.provenance import Provenance
from ihprobe.io.sources import supported_architectures
from ihprobe.io.swap import swap_weights
from ihprobe.io.tokenizers import has_tokenizer, on_disk, tokenizer_for

IN_PLACE = "_ihprobe_bridge"  # the bridge of a HF object bridged in place, kept on the object
_BRIDGED: weakref.WeakKeyDictionary[torch.nn.Module, TransformerBridge] = (
    weakref.WeakKeyDictionary()
)


def load(source, *, copy: bool = True, **kwargs) -> TransformerBridge:
    """``ihprobe.load``: a checkpoint path or hub id loaded by :func:`ihprobe.io.models.load`
    (every keyword of it: ``device``, ``dtype``, ``device_map``, ``max_memory``,
    ``offload_folder``...), or a HF ``PreTrainedModel`` of one's own bridged.

    Bridging rewires a HF object: TransformerLens wraps its modules with hook points and ihprobe
    sets its attention implementation. So by default a copy is bridged and the user's object
    is left as it is (a second copy of its weights); ``copy=False`` bridges the object itself.
    A model dispatched by a device map is always bridged in place, neither copied nor moved.

    Example:
        >>> hf = AutoModelForCausalLM.from_pretrained("ckpt", device_map="auto",
        ...     max_memory={"cpu": "2GB"}, offload_folder="offload")      # doctest: +SKIP
        >>> model = ihprobe.load(hf)            # bridged in place      # doctest: +SKIP
    """
    if isinstance(source, PreTrainedModel):
        if kwargs:
            raise IhprobeError(
                f"a HF model object is loaded already, so {', '.join(sorted(kwargs))} do not "
                "apply: place it with from_pretrained(device_map=...), or pass its checkpoint "
                "path."
            )
        return as_model(source, copy=copy)
    return models.load(source, **kwargs)


def as_model(model, name: str = "model", *, copy: bool = True):
    """``model`` as a hooked model: a TransformerLens model itself, a path or hub id loaded,
    a HF ``PreTrainedModel`` bridged (a copy built once per object, refreshed with its current
    weights on every call: the user's model is left as it is, at the cost of a second copy of
    its weights; the object itself when ``copy`` is False or a device map dispatched it).

    Raises:
        IhprobeError: any other type, or an architecture TransformerLens cannot bridge.
    """
    if isinstance(model, (str, os.PathLike)):
        return models.load(model)
    if isinstance(model, torch.nn.Module) and hasattr(getattr(model, "cfg", None), "n_layers"):
        return model
    if isinstance(model, PreTrainedModel):
        if IN_PLACE in model.__dict__:  # bridged in place: its weights are the bridge's
            return model.__dict__[IN_PLACE]
        if is_dispatched(model) or not copy:
            _check_bridged(type(model).__name__)
            # kept on the object (a cycle the collector frees with it), not in _BRIDGED, whose
            # value would hold its own key alive for ever
            model.__dict__[IN_PLACE] = _from_hf(model)
            return model.__dict__[IN_PLACE]
        if model not in _BRIDGED:
            _check_bridged(type(model).__name__)  # before copying what cannot be bridged
            _BRIDGED[model] = _from_hf(deepcopy(model))
        else:  # the user may have trained it since
            swap_weights(_BRIDGED[model], model.state_dict())
        return _BRIDGED[model]
    raise IhprobeError(
        f"{name} must be a model from ihprobe.load, a HF PreTrainedModel, a checkpoint path or "
        f"a hub id (got {type(model).__name__})."
    )


def _check_bridged(kind: str) -> None:
    """Refuse a HF model class that TransformerLens has no adapter for, in one line."""
    if kind not in supported_architectures():
        raise IhprobeError(
            f"TransformerLens cannot bridge {kind}; ihprobe probes the architectures it "
            "bridges (ihprobe.io.sources.supported_architectures())."
        )


def _from_hf(hf_model: PreTrainedModel) -> TransformerBridge:
    """A bridge around a copy of a HF model a user built; its provenance names the config's
    source."""
    kind = type(hf_model).__name__
    _check_bridged(kind)
    hf_model.set_attn_implementation(LOAD_ATTENTION)  # io/attention: which attention a pass runs
    config = hf_model.config
    where = Path(str(config.name_or_path or "."))
    own = bool(config.name_or_path) and has_tokenizer(where)
    tokenizer = tokenizer_for(where, config) if own else id_tokenizer(config.vocab_size)
    param = next(hf_model.parameters())
    device = first_device(hf_model) if is_dispatched(hf_model) else param.device
    hf_tensors = dict(hf_model.state_dict(keep_vars=True))
    label = str(config.name_or_path or kind)
    with tempfile.TemporaryDirectory() as tmp:
        model = bridge(hf_model, label, on_disk(tokenizer, tmp), device, param.dtype)
    model.eval()
    remember(model, Provenance(label), hf_tensors)
    return model
