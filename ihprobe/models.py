"""Load any causal LM checkpoint into a TransformerLens hooked model, safely.

Sources: a local HF checkpoint directory, a checkpoint written by ihprobe's trainer (an HF
directory plus ``ihprobe.json``), or a hub id with a revision when the hub or the local HF cache
can serve it. Nothing in a checkpoint is ever executed: weights come from safetensors, or from
``.bin``/``.pt`` files only through ``torch.load(weights_only=True)``, and remote code runs only
when the caller passes ``trust_remote_code=True``.

>>> model = load("runs/demo/checkpoints/step-001000")        # doctest: +SKIP
>>> [c.step for c in checkpoints("runs/demo")][:3]            # doctest: +SKIP
[0, 50, 100]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from ihprobe.errors import IhprobeError
from ihprobe.scores import Provenance

log = logging.getLogger(__name__)

CHECKPOINT_META = "ihprobe.json"  # written by ihprobe's trainer beside each checkpoint
RUN_META = "run.json"  # written by ihprobe's trainer at the top of a run directory
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth")
PROCESSING = ("none", "tl")
CONFIG_NAMES = ("_name_or_path", "transformers_version")  # config keys that name, not shape


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a training run: where it is and how far training had got."""

    source: str  # local directory or hub id
    revision: str | None = None  # hub revision (e.g. Pythia "step1000"); None for local dirs
    step: int | None = None  # optimiser updates done when it was saved, when known
    tokens: int | None = None  # training tokens seen when it was saved, when known

    @property
    def label(self) -> str:
        return self.revision or Path(self.source).name


# ----------------------------------------------------------------------------- loading


def load(
    source: str | os.PathLike,
    *,
    revision: str | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    tokenizer=None,
    processing: str = "none",
    trust_remote_code: bool = False,
):
    """Load a checkpoint as a TransformerLens ``TransformerBridge`` ready for the probes.

    Args:
        source: checkpoint directory, ihprobe checkpoint, or hub id.
        revision: hub revision (branch, tag, commit; Pythia's ``"step1000"``).
        device: where to put the model.
        dtype: parameter dtype.
        tokenizer: an HF tokenizer to use instead of the checkpoint's own. A directory with no
            tokenizer loads with a warning and a stand-in that maps id ``i`` to ``"<i>"``.
        processing: ``"none"`` keeps HF's weights, so logits equal the HF model's; ``"tl"``
            applies TransformerLens processing (LayerNorm folding, weight and unembedding
            centering). Centering the unembedding shifts every logit at a position by the
            same constant: logits then differ from HF's while log-probs agree.
        trust_remote_code: allow code shipped with a hub model to run. Off by default.

    Raises:
        IhprobeError: a missing path, a directory without ``config.json``, a config that is not
            a supported causal LM, corrupt or truncated weights, or a pickle that would run code.

    Example:
        >>> model = load("EleutherAI/pythia-70m", revision="step1000")   # doctest: +SKIP
    """
    if processing not in PROCESSING:
        raise IhprobeError(f"processing={processing!r} is not one of {PROCESSING}.")
    path = resolve(source, revision=revision, trust_remote_code=trust_remote_code)
    config = causal_lm_config(path, trust_remote_code=trust_remote_code)
    check_weights(path)
    if tokenizer is None:
        tokenizer = _tokenizer_for(path, config, trust_remote_code)
    hf_model = _hf_model(path, config, dtype, trust_remote_code)
    hf_tensors = dict(hf_model.state_dict(keep_vars=True))  # HF names, before the bridge rewires
    with tempfile.TemporaryDirectory() as tmp:  # TransformerLens re-opens tokenizers by path
        model = _bridge(hf_model, str(source), _on_disk(tokenizer, tmp), device, dtype)
    model.ihprobe_hf_tensors = hf_tensors
    if processing == "tl":
        model.enable_compatibility_mode(disable_warnings=True)
    model.eval()
    meta = checkpoint_meta(path)
    model.ihprobe_provenance = Provenance(
        model=_model_name(source, path),
        revision=revision,
        step=meta.get("step"),
        tokens=meta.get("tokens"),
    )
    return model


def _hf_model(path: Path, config, dtype: torch.dtype, trust_remote_code: bool = False):
    """The HF model of a checked checkpoint directory (HF maps old tensor names)."""
    from transformers import AutoModelForCausalLM

    with warnings.catch_warnings(), _quiet_progress():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_pretrained(
            str(path),
            config=config,
            dtype=dtype,
            attn_implementation="eager",  # hook_pattern needs the explicit attention weights
            use_safetensors=_has_safetensors(path),
            trust_remote_code=trust_remote_code,
            local_files_only=True,
        )


@contextlib.contextmanager
def _quiet_progress():
    """No "Loading weights" bars from transformers while a checkpoint loads."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _bridge(hf_model, name: str, tokenizer, device, dtype):
    from transformer_lens.model_bridge import TransformerBridge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TransformerBridge.boot_transformers(
            name, hf_model=hf_model, tokenizer=tokenizer, device=device, dtype=dtype
        )


def load_weights(model, source: str | os.PathLike, *, revision: str | None = None) -> None:
    """Copy the weights of another checkpoint into an already loaded ``model``, in place.

    Sweeping the checkpoints of one run this way reuses one skeleton instead of rebuilding the
    model per checkpoint. The checkpoint must have the same architecture and shapes, and
    ``model`` must come from :func:`load` with ``processing="none"``.
    """
    targets = getattr(model, "ihprobe_hf_tensors", None)
    if targets is None or getattr(model, "compatibility_mode", False):
        raise IhprobeError(
            "load_weights needs a model from ihprobe.load(..., processing='none'); "
            "load the checkpoint with ihprobe.load instead."
        )
    path = resolve(source, revision=revision)
    config = causal_lm_config(path)
    loaded, wanted = model.original_model.config.to_dict(), config.to_dict()
    differ = sorted(k for k in set(loaded) | set(wanted)
                    if k not in CONFIG_NAMES and loaded.get(k) != wanted.get(k))  # fmt: skip
    if differ:
        raise IhprobeError(
            f"{path} has another architecture than the loaded model (config differs in "
            f"{', '.join(differ[:5])}); load it with ihprobe.load instead."
        )
    check_weights(path)
    state = _hf_model(path, config, model.cfg.dtype).state_dict()
    mismatched = sorted(k for k in targets if k not in state or state[k].shape != targets[k].shape)
    if mismatched:
        raise IhprobeError(
            f"{path} does not match the loaded model's architecture (tensors {mismatched[:3]} "
            "missing or of another shape); load it with ihprobe.load instead."
        )
    with torch.no_grad():
        for name, tensor in state.items():
            if name in targets:
                targets[name].copy_(tensor)
    _resplit_fused_qkv(model)
    meta = checkpoint_meta(path)
    old = provenance(model)
    model.ihprobe_provenance = Provenance(
        model=old.model, revision=revision, step=meta.get("step"), tokens=meta.get("tokens")
    )


def load_or_swap(model, source: str | os.PathLike, *, revision: str | None = None):
    """``source`` as a hooked model, reusing ``model``'s skeleton when it can.

    With no ``model`` (None), or one of another architecture, this is :func:`load`; otherwise
    the weights of ``source`` are copied into ``model`` (:func:`load_weights`). Sweeping a run
    with it builds the model once.

    Example:
        >>> model = None
        >>> for ckpt in checkpoints("runs/demo/main"):                  # doctest: +SKIP
        ...     model = load_or_swap(model, ckpt.source)
    """
    if model is not None:
        try:
            load_weights(model, source, revision=revision)
            return model
        except IhprobeError:  # another architecture, or not a swappable model: load afresh
            pass
    return load(source, revision=revision)


def _resplit_fused_qkv(model) -> None:
    """Fused-QKV bridges (GPT-NeoX) keep q/k/v as copies made at boot: make them again."""
    from transformer_lens.model_bridge.generalized_components.joint_qkv_attention import (
        JointQKVAttentionBridge,
    )

    for module in model.modules():
        if isinstance(module, JointQKVAttentionBridge):
            module.set_original_component(module.original_component)


def provenance(model) -> Provenance:
    """The provenance ``load`` attached, or the model's name for models loaded elsewhere."""
    found = getattr(model, "ihprobe_provenance", None)
    if found is not None:
        return found
    return Provenance(model=str(getattr(model.cfg, "model_name", "model")))


def _model_name(source, path: Path) -> str:
    meta = checkpoint_meta(path)
    if meta.get("run"):
        return str(meta["run"])
    return str(source)


# ----------------------------------------------------------------------------- resolving


def resolve(
    source: str | os.PathLike, *, revision: str | None = None, trust_remote_code: bool = False
) -> Path:
    """The local directory holding ``source``: the path itself, or the hub snapshot.

    A hub id is served from the local HF cache when it is there; otherwise it is downloaded only
    when the hub is reachable right now. Offline, it fails at once with what to do.
    """
    text = str(source)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise IhprobeError(
                f"{path} is a file; pass the checkpoint directory that holds config.json."
            )
        if not (path / "config.json").is_file():
            runs = checkpoints(path) if _looks_like_run(path) else []
            hint = (
                f" It is a run directory: pass one of its checkpoints, e.g. {runs[-1].source}, "
                "or use ihprobe.checkpoints() to sweep them."
                if runs
                else " Pass a directory written by save_pretrained (config.json + *.safetensors)."
            )
            raise IhprobeError(f"{path} has no config.json.{hint}")
        return path
    if _looks_like_path(text):
        raise IhprobeError(
            f"{text} does not exist. Looked for a checkpoint directory at {path.resolve()}; "
            "pass an existing directory or a hub id such as EleutherAI/pythia-70m."
        )
    return _hub_snapshot(text, revision)


def _looks_like_path(text: str) -> bool:
    """Whether a missing ``text`` was meant as a local path rather than a hub id."""
    if text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1:
        return True
    return "/" in text and Path(text.split("/")[0]).exists()


def _looks_like_run(path: Path) -> bool:
    return (path / RUN_META).is_file() or any(
        (p / "config.json").is_file() for p in _candidate_dirs(path)
    )


def _hub_snapshot(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    patterns = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]
    try:
        return Path(
            snapshot_download(
                repo_id, revision=revision, local_files_only=True, allow_patterns=patterns
            )
        )
    except (LocalEntryNotFoundError, OSError, ValueError):
        pass
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false") or not _hub_reachable():
        rev = f" at revision {revision}" if revision else ""
        raise IhprobeError(
            f"{repo_id}{rev} is not in the local HF cache and the hub cannot be reached. "
            "Pass a local checkpoint directory, or download it where the hub is reachable "
            "(huggingface-cli download) and point HF_HOME at that cache."
        )
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=patterns))
    except Exception as err:  # noqa: BLE001 - hub errors come in many types
        raise IhprobeError(f"could not fetch {repo_id} from the hub: {err}") from err


def _hub_reachable(timeout: float = 2.0) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = re.sub(r"^https?://", "", endpoint).split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


# ----------------------------------------------------------------------------- validation


def causal_lm_config(path: Path, *, trust_remote_code: bool = False):
    """Read ``config.json`` and check that it describes a causal LM TransformerLens supports."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        raw = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as err:
        raise IhprobeError(f"{path / 'config.json'} is not valid JSON ({err}).") from err
    model_type = raw.get("model_type")
    architectures = raw.get("architectures") or []
    supported = supported_architectures()
    causal = model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and (
        not architectures or any(a in supported for a in architectures)
    )
    if not causal and not trust_remote_code:
        listed = ", ".join(architectures) or "no architectures listed"
        raise IhprobeError(
            f"{path} holds a {model_type or 'unknown'} model ({listed}), not a causal language "
            f"model ihprobe can probe. Supported architectures include "
            f"{', '.join(SUPPORTED_EXAMPLES)} (all {len(supported)}: "
            "ihprobe.models.supported_architectures())."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.from_pretrained(
            str(path), trust_remote_code=trust_remote_code, local_files_only=True
        )


SUPPORTED_EXAMPLES = (
    "GPT2LMHeadModel",
    "GPTNeoXForCausalLM",
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "GemmaForCausalLM",
)


def supported_architectures() -> list[str]:
    """HF causal-LM architecture names that TransformerLens's bridge has an adapter for."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return sorted(a for a in SUPPORTED_ARCHITECTURES if a.endswith(("CausalLM", "LMHeadModel")))


def weight_files(path: Path) -> list[Path]:
    """The checkpoint's weight files: safetensors when present, else pickled state dicts."""
    safes = sorted(path.glob("*.safetensors"))
    if safes:
        return safes
    pickles = sorted(p for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if not pickles:
        raise IhprobeError(
            f"{path} has no weights: looked for *.safetensors, *.bin, *.pt. "
            "Save the model with save_pretrained()."
        )
    return pickles


def _has_safetensors(path: Path) -> bool:
    return any(path.glob("*.safetensors"))


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint, read without executing anything from it."""
    state: dict[str, torch.Tensor] = {}
    for file in weight_files(path):
        state.update(_read_file(file))
    return state


def _read_file(file: Path) -> dict[str, torch.Tensor]:
    if file.suffix == ".safetensors":
        from safetensors.torch import load_file

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


def check_weights(path: Path) -> None:
    """Open every weight file safely; fail with the file's name when one is corrupt.

    Safetensors headers are checked against the file size; pickles are opened with
    ``weights_only=True`` so that a payload that would run code is refused before HF sees it.
    """
    for file in weight_files(path):
        if file.suffix == ".safetensors":
            _check_safetensors(file)
        else:
            _read_file(file)


def _check_safetensors(file: Path) -> None:
    size = file.stat().st_size
    try:
        with open(file, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or 8 + n > size:
                raise ValueError("header longer than the file")
            header = json.loads(fh.read(n))
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
        if 8 + n + end > size:
            raise ValueError(f"data ends at byte {8 + n + end} but the file has {size}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise IhprobeError(
            f"{file} is corrupt or truncated ({err}); re-save or re-download it."
        ) from err


def check_finite(source: str | os.PathLike | Path) -> None:
    """Raise naming the first tensor that holds NaN or inf values."""
    for name, tensor in read_state_dict(resolve(source)).items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise IhprobeError(f"{source}: tensor {name} has {bad} NaN/inf values.")


def weights_hash(source: str | os.PathLike | Path) -> str:
    """SHA-256 over tensor names, dtypes, shapes and values (file layout does not matter)."""
    digest = hashlib.sha256()
    state = read_state_dict(resolve(source))
    for name in sorted(state):
        t = state[name].contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


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


# ----------------------------------------------------------------------------- checkpoints


def checkpoint_meta(path: Path) -> dict:
    """``ihprobe.json`` of a trainer checkpoint, or {} for other checkpoints."""
    file = Path(path) / CHECKPOINT_META
    return json.loads(file.read_text()) if file.is_file() else {}


def checkpoints(source: str | os.PathLike, revisions: list[str] | None = None) -> list[Checkpoint]:
    """The checkpoints of a run, in training order, with step and tokens where known.

    Args:
        source: a run directory (ihprobe's trainer writes ``checkpoints/step-NNNNNN/``; any
            directory of HF checkpoint subdirectories such as HF Trainer's ``checkpoint-500``
            works too), a single checkpoint directory, or a hub id together with ``revisions``.
        revisions: hub revisions to sweep, e.g. ``[f"step{s}" for s in (0, 1000, 2000)]``;
            steps are read from digits in the names.
    """
    if revisions is not None:
        found = [Checkpoint(str(source), r, _digits(r)) for r in revisions]
        return sorted(found, key=lambda c: (c.step is None, c.step or 0))
    path = Path(source).expanduser()
    if not path.is_dir():
        raise IhprobeError(
            f"{source} is not a directory; pass a run directory, or a hub id with revisions=[...]."
        )
    if (path / "config.json").is_file():
        meta = checkpoint_meta(path)
        return [Checkpoint(str(path), None, meta.get("step"), meta.get("tokens"))]
    found = []
    for sub in _candidate_dirs(path):
        if (sub / "config.json").is_file():
            meta = checkpoint_meta(sub)
            step = meta.get("step", _digits(sub.name))
            found.append(Checkpoint(str(sub), None, step, meta.get("tokens")))
    if not found:
        raise IhprobeError(
            f"{path} holds no checkpoints: looked for subdirectories with config.json in {path} "
            f"and {path / 'checkpoints'}."
        )
    return sorted(found, key=lambda c: (c.step is None, c.step or 0, c.source))


def _candidate_dirs(path: Path) -> list[Path]:
    roots = [path / "checkpoints", path]
    return [p for root in roots if root.is_dir() for p in sorted(root.iterdir()) if p.is_dir()]


def _digits(name: str) -> int | None:
    found = re.findall(r"\d+", name)
    return int(found[-1]) if found else None


# ----------------------------------------------------------------------------- tokenizer


def _on_disk(tokenizer, tmp: str):
    """A tokenizer built in memory, saved to ``tmp`` and re-read, so that it has a path."""
    if tokenizer.init_kwargs.get("name_or_path") or tokenizer.bos_token is None:
        return tokenizer
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp)
    return AutoTokenizer.from_pretrained(tmp)


def _tokenizer_for(path: Path, config, trust_remote_code: bool):
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        from ihprobe.data.tokenizer import id_tokenizer

        log.warning(
            "%s has no tokenizer files; the model works on token ids and a stand-in tokenizer "
            "maps id i to '<i>'. Pass tokenizer=... to use a real one.",
            path,
        )
        warnings.warn(
            f"{path} has no tokenizer; using a stand-in that maps id i to '<i>'.", stacklevel=3
        )
        return id_tokenizer(config.vocab_size)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            str(path), trust_remote_code=trust_remote_code, local_files_only=True
        )
    except Exception as err:  # noqa: BLE001 - tokenizer formats fail in many ways
        raise IhprobeError(
            f"could not read the tokenizer in {path} ({err}); pass tokenizer=... explicitly."
        ) from err
