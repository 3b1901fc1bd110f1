"""Tensor checks: every value finite before anything computes, and the weights HF loaded are the
checkpoint's own (no tensor missing, unexpected or of another shape), in a causal model.

Finiteness is checked on the files, one tensor at a time, so a message names the tensor as the
checkpoint spells it (``embed_out.weight``). Names and shapes are checked against the skeleton
with HF's own loading report, which already applies HF's renaming of legacy tensor names.

>>> import tempfile
>>> from safetensors.torch import save_file
>>> weights = Path(tempfile.mkdtemp()) / "model.safetensors"
>>> save_file({"embed_out.weight": torch.tensor([1.0, float("nan")])}, weights)
>>> check_finite_files([weights])  # doctest: +ELLIPSIS
Traceback (most recent call last):
ihprobe.core.errors.IhprobeError: .../model.safetensors: tensor embed_out.weight has 1 NaN/inf ...
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from safetensors import safe_open
from transformers.utils import logging as hf_logging

from ihprobe.core.errors import IhprobeError
from ihprobe.io.offload import first_device, is_dispatched
from ihprobe.io.validation.files import safetensors_header
from ihprobe.io.validation.numerics import all_finite

NOT_FLOAT = ("I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL")
# buffers older transformers saved (causal masks, rotary frequencies); HF recomputes them
LEGACY_BUFFERS = (
    "attn.bias",
    "attn.masked_bias",
    "attention.bias",
    "attention.masked_bias",
    "inv_freq",
)
CAUSAL_PROBE_LENGTH = 8  # tokens of the future-token test; its first half must not change


def check_finite_files(files: list[Path]) -> None:
    """Raise naming the first tensor of ``files`` that holds a NaN or inf value."""
    for file in files:
        for name, tensor in _tensors(file):
            if not all_finite(tensor):
                bad = int((~torch.isfinite(tensor)).sum())
                raise IhprobeError(
                    f"{file}: tensor {name} has {bad} NaN/inf value{'s' * (bad > 1)}; the "
                    "weights are broken (diverged training or a corrupt file): use another "
                    "checkpoint."
                )


def _tensors(file: Path):
    """(name, tensor) pairs of one weight file, read without running code from it."""
    if file.suffix == ".safetensors":
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                yield name, handle.get_tensor(name)
        return
    try:
        state = torch.load(str(file), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - UnpicklingError and friends
        raise IhprobeError(
            f"refused to load {file}: it is not a plain tensor file ({type(err).__name__}). "
            "Convert it to safetensors from a trusted environment."
        ) from err
    if not isinstance(state, dict):
        raise IhprobeError(f"{file} does not hold a state dict (found {type(state).__name__}).")
    yield from ((str(k), v) for k, v in state.items() if isinstance(v, torch.Tensor))


def check_loading_info(path: Path, info: dict) -> None:
    """Refuse a load in which HF found tensors missing, unexpected or of another shape.

    ``info`` is what ``from_pretrained(..., output_loading_info=True)`` returns; HF fills missing
    tensors with random values, which would be probed as if they were the checkpoint's. Buffers
    of older checkpoints (:data:`LEGACY_BUFFERS`) are not unexpected.
    """
    problems = []
    for key, what in (
        ("missing_keys", "missing"),
        ("unexpected_keys", "unexpected"),
        ("mismatched_keys", "of another shape than config.json implies"),
    ):
        names = sorted(_name(k) for k in info.get(key) or ())
        if key == "unexpected_keys":
            names = [n for n in names if not n.endswith(LEGACY_BUFFERS)]
        if names:
            first = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            problems.append(f"{len(names)} tensors {what} ({first})")
    if problems:
        raise IhprobeError(
            f"{path}: the weights do not match the architecture: {'; '.join(problems)}. "
            "Re-save the checkpoint with save_pretrained."
        )


def check_dtypes(files: list[Path], hf_model) -> None:
    """Refuse a floating-point weight of the model stored as integers or booleans in ``files``.

    Example:
        >>> check_dtypes([Path("ckpt/model.safetensors")], hf_model)     # doctest: +SKIP
    """
    expected = hf_model.state_dict()
    for file in files:
        for name, entry in safetensors_header(file).items():
            tensor = expected.get(name)
            if tensor is not None and tensor.is_floating_point() and entry["dtype"] in NOT_FLOAT:
                raise IhprobeError(
                    f"{file}: tensor {name} is stored as {entry['dtype']}, but the model's "
                    f"{name} holds floating-point weights; re-save the checkpoint."
                )


def _name(key) -> str:
    return str(key[0] if isinstance(key, tuple) else key)  # mismatched: (name, shape, shape)


def check_causal(hf_model, path: Path) -> None:
    """Refuse a model whose outputs at a position change when later tokens change.

    Example:
        >>> check_causal(AutoModelForCausalLM.from_pretrained("ckpt"), "ckpt")  # doctest: +SKIP
    """
    vocab = hf_model.get_input_embeddings().num_embeddings
    if vocab < 2:
        return
    half = CAUSAL_PROBE_LENGTH // 2
    # a dispatched model's first parameter may be an offloaded stand-in on meta
    first = next(hf_model.parameters()).device
    device = first_device(hf_model) if is_dispatched(hf_model) else first
    tokens = torch.arange(CAUSAL_PROBE_LENGTH, device=device).remainder(vocab).unsqueeze(0)
    changed = tokens.clone()
    changed[:, half:] = (changed[:, half:] + 1).remainder(vocab)
    with torch.no_grad():
        logits = hf_model(torch.cat([tokens, changed])).logits[:, :half]
    # a causal model computes the first half identically: allow rounding noise only
    tolerance = 16 * torch.finfo(logits.dtype).eps * (1 + float(logits[0].abs().max()))
    logits = logits.float()
    if float((logits[0] - logits[1]).abs().max()) > tolerance:
        raise IhprobeError(
            f"{path}: its outputs change when later tokens change, so attention sees future "
            "tokens; induction-head probes need a causal language model."
        )


@contextlib.contextmanager
def hf_loading(path: Path):
    """Quiet HF while it reads ``path``, and turn its errors into one line.

    Its load report is not printed (ihprobe refuses or accepts the load itself), and a config
    value HF cannot build a model from (``hidden_act: "x"``, a dropout of 3) raises
    :class:`IhprobeError` naming the checkpoint instead of a traceback from inside HF.
    """
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    except (IhprobeError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - HF raises many types for bad configs
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise IhprobeError(
            f"transformers could not build a model from {path} ({reason}); fix config.json."
        ) from err
    finally:
        hf_logging.set_verbosity(level)
