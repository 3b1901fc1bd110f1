"""Load any causal LM checkpoint into a TransformerLens hooked model, safely.

Sources: a local HF checkpoint directory, a checkpoint written by ihprobe's trainer (an HF
directory plus ``ihprobe.json``), or a hub id with a revision when the hub or the local HF cache
can serve it (:mod:`ihprobe.io.sources`). Nothing in a checkpoint is ever executed: weights come
from safetensors, or from ``.bin``/``.pt`` files only through ``torch.load(weights_only=True)``
(:mod:`ihprobe.io.weights`), and remote code runs only when the caller passes
``trust_remote_code=True``.

What ihprobe knows about a loaded model (its :class:`Provenance` and the HF tensors that
:func:`~ihprobe.io.swap.load_weights` copies into) is kept beside it in a weak-key map
(``LOADED``), never as attributes of TransformerLens's object.

>>> model = load("runs/demo/checkpoints/step-001000")        # doctest: +SKIP
>>> provenance(model).step                                    # doctest: +SKIP
1000
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge
from transformers import AutoModelForCausalLM, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from ihprobe.core.devices import stray_tensors
from ihprobe.core.dtypes import DTYPE_NAMES
from ihprobe.core.errors import IhprobeError
from ihprobe.core.world import resolve_device
from ihprobe.io import (
    falcon,  # noqa: F401 - registers Falcon's grouped layout with the bridge
    offload,
)
from ihprobe.io.attention import LOAD_ATTENTION
from ihprobe.io.provenance import Provenance
from ihprobe.io.runs import checkpoint_meta
from ihprobe.io.sources import causal_lm_config, check_kind, resolve
from ihprobe.io.tokenizers import on_disk, tokenizer_for
from ihprobe.io.validation import check_checkpoint, check_loaded, hf_loading
from ihprobe.io.validation.build import check_build
from ihprobe.io.weights import (
    has_safetensors,
    verify_checksums,
    weight_files,
)

log = logging.getLogger(__name__)

PROCESSING = ("none", "tl")
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # name -> torch dtype


@dataclass
class _Loaded:
    """What :func:`load` knows about a model it built."""

    provenance: Provenance
    hf_tensors: dict[str, torch.Tensor]  # HF names -> the bridge's parameters, for load_weights


LOADED: weakref.WeakKeyDictionary[torch.nn.Module, _Loaded] = weakref.WeakKeyDictionary()
# a dispatched model's offload folder, released (ihprobe's files removed) when the model goes
OFFLOADS: weakref.WeakKeyDictionary[torch.nn.Module, weakref.finalize] = weakref.WeakKeyDictionary()


# ----------------------------------------------------------------------------- loading


def load(
    source: str | os.PathLike,
    *,
    revision: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    tokenizer=None,
    processing: str = "none",
    trust_remote_code: bool = False,
    device_map: str | dict | None = None,
    max_memory: dict | str | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> TransformerBridge:
    """Load a checkpoint as a TransformerLens ``TransformerBridge`` ready for the probes.

    Over 60 lines with this docstring, which names every keyword; the placement by a device
    map lives in :mod:`ihprobe.io.offload`.

    Args:
        source: checkpoint directory, ihprobe checkpoint, or hub id (``ihprobe.load`` also
            takes a HF model object: :func:`ihprobe.io.any_model.load`).
        revision: hub revision (branch, tag, commit; Pythia's ``"step1000"``).
        device: ``"cpu"``, ``"cuda"`` (``"cuda:1"``...) or ``"auto"`` (cuda when available).
        dtype: parameter dtype, ``"float32"``, ``"bfloat16"`` or ``"float16"`` (or the torch
            dtype). The probes accumulate in float32 whatever the model's dtype.
        tokenizer: an HF tokenizer to use instead of the checkpoint's own. A directory with no
            tokenizer loads with a warning and a stand-in that maps id ``i`` to ``"<i>"``.
        processing: ``"none"`` keeps HF's weights, so logits equal the HF model's; ``"tl"``
            applies TransformerLens processing (LayerNorm folding, weight and unembedding
            centering). Centering the unembedding shifts every logit at a position by the
            same constant: logits then differ from HF's while log-probs agree.
        trust_remote_code: allow code shipped with a hub model to run. Off by default.
        device_map: ``"auto"`` or a dict of module name to device: accelerate places the
            model over the GPUs, the CPU and the disk (``pip install 'ihprobe[offload]'``;
            ``device`` is then unused, inputs go to the first module's device).
        max_memory: the most each device may hold, ``{"cpu": "200MB", 0: "20GB"}``.
        offload_folder: a new or empty folder for weights that fit nowhere else; ihprobe
            removes the files it wrote there when the model is garbage collected (and the
            folder, when it created it). Without it the map may use no disk.

    Raises:
        IhprobeError: a missing path, a directory without ``config.json``, a config that is not
            a supported causal LM, corrupt or truncated weights, or a pickle that would run code.

    Example:
        >>> model = load("EleutherAI/pythia-70m", revision="step1000")   # doctest: +SKIP
        >>> big = load("ckpt", device_map="auto", max_memory={"cpu": "2GB"},
        ...            offload_folder="offload")                     # doctest: +SKIP
    """
    if processing not in PROCESSING:
        raise IhprobeError(f"processing={processing!r} is not one of {PROCESSING}.")
    if tokenizer is not None and not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise IhprobeError(
            f"tokenizer must be an HF tokenizer (AutoTokenizer.from_pretrained(...)) or None "
            f"for the checkpoint's own (got {type(tokenizer).__name__} {tokenizer!r:.40})."
        )
    placed = offload.placement(device_map, max_memory, offload_folder)
    if placed is not None and processing == "tl":
        raise IhprobeError(
            "processing='tl' rewrites every weight at once, which a device map's offloaded "
            "modules do not hold; use processing='none' with device_map."
        )
    dtype = parse_dtype(dtype)
    device = resolve_device(str(device)) if placed is None else None
    path = resolve(source, revision=revision, trust_remote_code=trust_remote_code)
    config = _checked_config(path, dtype, trust_remote_code, placed)
    if tokenizer is None:
        tokenizer = tokenizer_for(path, config, trust_remote_code)
    if placed is None:
        # on the device before the bridge wraps it: boot_transformers leaves a given model
        # where it is, and the tensors load_weights copies into must be the ones it ends up using
        hf_model = build_hf_model(path, config, dtype, trust_remote_code).to(device)
    else:
        hf_model = _dispatched(path, config, dtype, trust_remote_code, placed)
        device = offload.first_device(hf_model)
    hf_tensors = dict(hf_model.state_dict(keep_vars=True))  # HF names, before the bridge rewires
    try:
        with tempfile.TemporaryDirectory() as tmp:  # TransformerLens re-opens tokenizers by path
            model = bridge(hf_model, str(source), on_disk(tokenizer, tmp), device, dtype)
    except BaseException:  # a model that cannot be bridged leaves no offload files behind
        if placed is not None and placed.folder is not None:
            del hf_model
            placed.folder.release()
        raise
    if processing == "tl":
        model.enable_compatibility_mode(disable_warnings=True)
    model.eval()
    meta = checkpoint_meta(path)
    prov = Provenance(model_name(source, path), revision, meta.get("step"), meta.get("tokens"))
    remember(model, prov, hf_tensors)
    if placed is not None and placed.folder is not None:
        OFFLOADS[model] = weakref.finalize(model, placed.folder.release)
    return model


def _dispatched(path: Path, config, dtype, trust_remote_code: bool, placed):
    """The HF model placed by a device map; its offload folder made, and recorded as
    ihprobe's once written (released at once when loading fails)."""
    if placed.folder is not None:
        placed.folder.make()
    try:
        hf_model = build_hf_model(path, config, dtype, trust_remote_code, placed)
    finally:
        if placed.folder is not None:
            placed.folder.record()
    return hf_model


def release_offload(model: torch.nn.Module) -> None:
    """Remove the offload files ihprobe wrote for ``model`` now (a sweep does before it loads
    the next checkpoint); the model must not run afterwards."""
    done = OFFLOADS.pop(model, None)
    if done is not None:
        done()


def remember(model: TransformerBridge, prov: Provenance, hf_tensors: dict) -> None:
    """Record what ihprobe knows about a bridge it built (for :func:`provenance` and
    :func:`~ihprobe.io.swap.load_weights`)."""
    LOADED[model] = _Loaded(prov, hf_tensors)


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """The torch dtype named by ``dtype`` (one of :data:`DTYPES`, or a torch dtype).

    >>> parse_dtype("bfloat16")
    torch.bfloat16
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise IhprobeError(f"dtype={dtype!r} is not one of {', '.join(DTYPES)}.")


def validate_checkpoint(path: Path, trust_remote_code: bool = False) -> None:
    """Every check a checkpoint directory passes before anything is built from it: regular
    files inside it, the config schema, safetensors headers and finite tensors
    (:func:`ihprobe.io.validation.check_checkpoint`), and the SHA-256 ihprobe's trainer recorded in
    ``ihprobe.json``."""

    def kind(raw: dict) -> None:  # an architecture the bridge lacks is named first
        check_kind(raw, path, trust_remote_code=trust_remote_code, first=True)

    check_checkpoint(path, weight_files(path), kind=kind)
    verify_checksums(path)


def _checked_config(path: Path, dtype: torch.dtype, trust_remote_code: bool = False, placed=None):
    """The config of a checkpoint directory that passed :func:`validate_checkpoint` and whose
    model fits in memory as its weights say (``check_build``), or in the device map
    ``placed`` (:func:`ihprobe.io.offload.check_capacity`)."""
    validate_checkpoint(path, trust_remote_code)
    config = causal_lm_config(path, trust_remote_code=trust_remote_code)
    where = {"trust_remote_code": trust_remote_code, "in_memory": placed is None}
    parameters = check_build(path, config, weight_files(path), dtype, **where)
    if placed is not None:
        what = f"{path} ({parameters:.3g} parameters)"
        offload.check_capacity(placed, parameters * dtype.itemsize, what)
    return config


def load_hf(path: str | os.PathLike, dtype: str | torch.dtype = "float32") -> torch.nn.Module:
    """The plain HF model of a local checkpoint directory, with every check of :func:`load` but
    no TransformerLens bridge (the LLC's SGLD differentiates through HF's own modules).

    Example:
        >>> hf = load_hf("runs/demo/main/checkpoints/step-1000")            # doctest: +SKIP
    """
    path, dtype = Path(path), parse_dtype(dtype)
    return build_hf_model(path, _checked_config(path, dtype), dtype)


def build_hf_model(
    path: Path, config, dtype: torch.dtype, trust_remote_code: bool = False, placed=None
):
    """The HF model of a checked checkpoint directory (HF maps old tensor names), placed by
    ``placed``'s device map where given."""
    where = placed.from_pretrained() if placed is not None else {}
    with warnings.catch_warnings(), quiet_progress(), hf_loading(path), offload.refusals():
        warnings.simplefilter("ignore")
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path),
            config=config,
            dtype=dtype,
            attn_implementation=LOAD_ATTENTION,  # io/attention: which attention a pass runs
            use_safetensors=has_safetensors(path),
            trust_remote_code=trust_remote_code,
            local_files_only=True,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported in info and refused by check_loaded
            **where,
        )
    check_loaded(path, model, info)  # no tensor missing/unexpected/reshaped; causal
    return model


@contextlib.contextmanager
def quiet_progress():
    """No "Loading weights" bars from transformers while a checkpoint loads."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def bridge(hf_model, name: str, tokenizer, device, dtype):
    """The TransformerLens bridge around ``hf_model``; an architecture the bridge cannot wrap
    is one :class:`IhprobeError` line, not the bridge's own ``AttributeError``."""
    offload.check_bridgeable(hf_model)  # a map TransformerLens refuses, said as ihprobe's line
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            model = TransformerBridge.boot_transformers(
                name, hf_model=hf_model, tokenizer=tokenizer, device=device, dtype=dtype
            )
            placed = offload.is_dispatched(hf_model)  # accelerate's hooks place it: never moved
            if placed:  # TransformerLens may read its device off an offloaded (meta) parameter
                model.cfg.device = str(device)
            if not placed and stray_tensors(model, device):  # anything the bridge built elsewhere
                model.to(device, print_details=False)
            model(torch.zeros((1, 2), dtype=torch.long, device=device))  # fails here, not later
            return model
    except (
        AttributeError,
        KeyError,
        NotImplementedError,
        RuntimeError,
        TypeError,
        ValueError,
    ) as err:
        kind = type(hf_model).__name__
        raise IhprobeError(
            f"TransformerLens cannot bridge {kind} ({type(err).__name__}: {str(err)[:120]}); "
            "ihprobe probes the architectures it bridges, e.g. GPT2LMHeadModel, "
            "GPTNeoXForCausalLM, LlamaForCausalLM (all: ihprobe.io.sources."
            "supported_architectures())."
        ) from err


def provenance(model: torch.nn.Module) -> Provenance:
    """The provenance ``load`` recorded, or the model's name for models loaded elsewhere."""
    loaded = LOADED.get(model)
    if loaded is not None:
        return loaded.provenance
    return Provenance(model=str(getattr(model.cfg, "model_name", "model")))


def fill_provenance(
    model: torch.nn.Module, *, step: int | None = None, tokens: int | None = None
) -> None:
    """Record the step and tokens of a model ``load`` built, where its checkpoint did not say.

    Example:
        >>> fill_provenance(model, step=500)  # HF Trainer's checkpoint-500  # doctest: +SKIP
    """
    loaded = LOADED.get(model)
    if loaded is not None:
        old = loaded.provenance
        loaded.provenance = dataclasses.replace(
            old,
            step=old.step if old.step is not None else step,
            tokens=old.tokens if old.tokens is not None else tokens,
        )


def model_name(source, path: Path) -> str:
    """The name a model loaded from ``source`` (read at ``path``) goes by: its run's name from
    ``ihprobe.json``, else ``source`` as given.

    >>> model_name("org/m", Path("no/such/checkpoint"))
    'org/m'
    """
    meta = checkpoint_meta(path)
    if meta.get("run"):
        return str(meta["run"])
    return str(source)
