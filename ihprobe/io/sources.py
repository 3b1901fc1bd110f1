"""Where a checkpoint is: a local directory or a hub id (served from the HF cache or fetched),
and whether its config describes a causal LM that TransformerLens supports.

>>> resolve("runs/demo/checkpoints/step-002000")                     # doctest: +SKIP
PosixPath('runs/demo/checkpoints/step-002000')
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError
from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
from transformers import AutoConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import check_name_lengths, looks_local
from ihprobe.core.network import hub_reachable
from ihprobe.io.runs import Checkpoint, checkpoints, looks_like_run
from ihprobe.io.validation import hf_loading


def resolve(
    source: str | os.PathLike, *, revision: str | None = None, trust_remote_code: bool = False
) -> Path:
    """The local directory holding ``source``: the path itself, or the hub snapshot.

    A hub id is served from the local HF cache when it is there; otherwise it is downloaded only
    when the hub is reachable right now. Offline, it fails at once with what to do.
    """
    text = str(source)
    path = check_name_lengths(Path(text).expanduser(), "source")
    if path.exists():
        if not path.is_dir():
            raise IhprobeError(
                f"{path} is a file; pass the checkpoint directory that holds config.json."
            )
        if not (path / "config.json").is_file():
            runs = checkpoints(path) if looks_like_run(path) else []
            hint = (
                f" It is a run directory: pass one of its checkpoints, e.g. {runs[-1].source}, "
                "or use ihprobe.checkpoints() to sweep them."
                if runs
                else " Pass a directory written by save_pretrained (config.json + *.safetensors)."
            )
            raise IhprobeError(f"{path} has no config.json.{hint}")
        return path
    if looks_local(text):
        raise IhprobeError(
            f"{text} does not exist. Looked for a checkpoint directory at {path.resolve()}; "
            "pass an existing directory or a hub id such as EleutherAI/pythia-70m."
        )
    return _hub_snapshot(text, revision)


def _hub_snapshot(repo_id: str, revision: str | None) -> Path:
    patterns = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]
    try:
        return Path(
            snapshot_download(
                repo_id, revision=revision, local_files_only=True, allow_patterns=patterns
            )
        )
    except (LocalEntryNotFoundError, OSError, ValueError):
        pass
    if not hub_reachable():  # offline, or HF_HUB_OFFLINE set
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


def causal_lm_config(path: Path, *, trust_remote_code: bool = False):
    """Read ``config.json`` and check that it describes a causal LM TransformerLens supports."""
    try:
        raw = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as err:
        raise IhprobeError(f"{path / 'config.json'} is not valid JSON ({err}).") from err
    check_kind(raw, path, trust_remote_code=trust_remote_code)
    with warnings.catch_warnings(), hf_loading(path):
        warnings.simplefilter("ignore")
        return AutoConfig.from_pretrained(
            str(path), trust_remote_code=trust_remote_code, local_files_only=True
        )


def config_digest(path: Path) -> str:
    """The sha256 of the config the bridge reads from ``path`` (:func:`causal_lm_config`'s HF
    dict as canonical JSON, without the keys that name rather than shape the model): what a
    results cache keys a checkpoint by beside its weights, so the same tensors under another
    ``n_ctx``, rotary base or norm eps are another entry.

    >>> config_digest(checkpoint) == config_digest(same_config_elsewhere)  # doctest: +SKIP
    True
    """
    found = causal_lm_config(Path(path)).to_dict()
    plain = {k: v for k, v in found.items() if k not in ("_name_or_path", "transformers_version")}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_kind(raw: dict, path, *, trust_remote_code: bool = False, first: bool = False) -> None:
    """Refuse a parsed ``config.json`` (of ``path``) that is not a causal LM TransformerLens
    bridges, in one line naming its architecture. ``first``: before the config's other checks,
    refuse only a causal LM the bridge lacks (a config that names no model is left to the
    schema's own message).

    >>> check_kind({"model_type": "gpt2"}, "ckpt")
    >>> check_kind({"model_type": "bart"}, "ckpt")                  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: ckpt holds a bart model (BartForCausalLM): ...
    """
    # a field of the wrong type is the schema's to refuse (``check_config``), not a crash here
    model_type = raw.get("model_type") if isinstance(raw.get("model_type"), str) else None
    listed = raw.get("architectures")
    architectures = [a for a in listed if isinstance(a, str)] if isinstance(listed, list) else []
    supported = supported_architectures()
    named = architectures or (_causal_classes(model_type) if model_type else [])
    causal = model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    unbridged = [a for a in named if a in _causal_classes() and a not in supported]
    if trust_remote_code or (causal and any(a in supported for a in named)):
        return
    if unbridged:
        raise IhprobeError(
            f"{path} holds a {model_type} model ({', '.join(named)}): TransformerLens cannot "
            f"bridge {unbridged[0]}; ihprobe probes the architectures it bridges, e.g. "
            f"{', '.join(SUPPORTED_EXAMPLES[:3])} (all {len(supported)}: "
            "ihprobe.io.sources.supported_architectures())."
        )
    if first:
        return
    listed = ", ".join(architectures) or "no architectures listed"
    raise IhprobeError(
        f"{path} holds a {model_type or 'unknown'} model ({listed}), not a causal language "
        f"model ihprobe can probe. Supported architectures include "
        f"{', '.join(SUPPORTED_EXAMPLES)} (all {len(supported)}: "
        "ihprobe.io.sources.supported_architectures())."
    )


def _causal_classes(model_type: str | None = None) -> list[str]:
    """HF's causal-LM class names: of ``model_type``, or of every model type (None).

    >>> _causal_classes("gpt2")
    ['GPT2LMHeadModel']
    """
    found = []
    for kind, names in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        if model_type is None or kind == model_type:
            found.extend([names] if isinstance(names, str) else names)
    return found


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
    return sorted(a for a in SUPPORTED_ARCHITECTURES if a.endswith(("CausalLM", "LMHeadModel")))


def sources_of(source_or_sources, revisions: Sequence[str] | None = None) -> list[Checkpoint]:
    """The checkpoints named by a run directory, a checkpoint, a hub id with ``revisions``, or
    a list of any of these, ordered by tokens (or step where tokens are unknown).

    Example:
        >>> [c.label for c in sources_of("org/model", ["step2", "step1"])]
        ['step1', 'step2']
    """
    items = (
        list(source_or_sources)
        if isinstance(source_or_sources, (list, tuple))
        else [source_or_sources]
    )
    found: list[Checkpoint] = []
    for item in items:
        if isinstance(item, Checkpoint):
            found.append(item)
        elif revisions is not None:
            found.extend(checkpoints(checks.source(item), revisions=list(revisions)))
        elif Path(checks.source(item)).expanduser().is_dir():
            found.extend(checkpoints(item))
        else:
            found.append(Checkpoint(str(item)))  # a hub id at its default revision
    if not found:
        raise IhprobeError("no checkpoints to scan: pass a run directory or a list of sources.")
    return sorted(found, key=lambda c: (c.tokens is None, c.tokens or 0, c.step or 0))
