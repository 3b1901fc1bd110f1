"""The ``config.json`` schema: types, ranges, divisibility, causality and size, before allocation.

HF architectures name the same quantity differently (``n_layer``, ``num_hidden_layers``), so the
schema is a table of fields, each with the keys it may go by; a field is checked when any of its
keys is present. Every number anywhere in the config must be finite.

>>> check_config({"model_type": "gpt2", "n_layer": "two"}, "ckpt")
Traceback (most recent call last):
ihprobe.core.errors.IhprobeError: ckpt: n_layer must be an integer (got 'two'); fix config.json.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import SIZE_LIMIT_ENV, limits_on

MAX_CONFIG_BYTES = 10 * 2**20
MAX_PARAMETERS = 20_000_000_000  # estimated parameters: 80 GB in float32


@dataclass(frozen=True)
class Field:
    keys: tuple[str, ...]  # names it goes by across architectures, first found wins
    maximum: int  # size limit (lifted by SIZE_LIMIT_ENV / size_limits=False)
    optional: bool = False  # may be null
    minimum: int = 1  # smallest value accepted


FIELDS = {
    "vocab_size": Field(("vocab_size", "n_vocab"), 10_000_000),
    "hidden_size": Field(("hidden_size", "n_embd", "d_model"), 1_000_000),
    "layers": Field(("num_hidden_layers", "n_layer", "num_layers"), 1_024),
    "heads": Field(("num_attention_heads", "n_head", "num_heads"), 1_024),
    "kv_heads": Field(("num_key_value_heads", "n_kv_heads"), 1_024, optional=True),
    "head_dim": Field(("head_dim",), 100_000, optional=True),
    # 0: attention-only (the trainer's d_mlp=0), an MLP whose output is its bias or zero
    "intermediate_size": Field(("intermediate_size", "n_inner", "ffn_dim"), 10_000_000, True, 0),
    "context": Field(("max_position_embeddings", "n_positions", "n_ctx"), 100_000_000, True),
}
LM_HEADS = ("ForCausalLM", "LMHeadModel")
EPSILON_KEYS = ("layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps", "norm_eps", "eps")

# Encoder families whose causal-LM head is causal only when ``is_decoder`` is true (BERT's
# BertLMHeadModel attends to future tokens otherwise); other architectures are always causal.
CAUSAL_ONLY_AS_DECODER = frozenset(
    {
        "bert",
        "bert-generation",
        "big_bird",
        "camembert",
        "data2vec-text",
        "electra",
        "ernie",
        "megatron-bert",
        "rembert",
        "roberta",
        "roberta-prelayernorm",
        "roc_bert",
        "roformer",
        "xlm-roberta",
        "xlm-roberta-xl",
        "xmod",
    }
)


def read_config(file: Path) -> dict:
    """The JSON object in ``file``, or an error saying why it is not one."""
    size = file.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise IhprobeError(f"{file} is {size} bytes, too large for a config; fix config.json.")
    try:
        raw = json.loads(file.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise IhprobeError(f"{file} is not valid JSON ({reason}); fix config.json.") from err
    if not isinstance(raw, dict):
        raise IhprobeError(
            f"{file} holds a JSON {type(raw).__name__}, not an object of settings; "
            "fix config.json (save_pretrained writes one)."
        )
    return raw


def check_config(raw: dict, where: str, *, size_limits: bool | None = None) -> dict[str, int]:
    """Check ``raw`` (a parsed ``config.json``); return the shape fields found by schema name.

    Args:
        raw: the parsed config.
        where: the file, for messages.
        size_limits: refuse configs beyond the limits of :data:`FIELDS` and
            :data:`MAX_PARAMETERS`; default on unless the environment variable
            ``IHPROBE_NO_SIZE_LIMITS=1`` is set.
    """
    _check_finite_numbers(raw, where)
    _check_names(raw, where)
    found = {name: _integer_field(raw, field, where) for name, field in FIELDS.items()}
    found = {k: v for k, v in found.items() if v is not None}
    _check_epsilons(raw, where)
    _check_divisibility(found, where)
    _check_causal(raw, where)
    if size_limits is None:
        size_limits = limits_on()
    if size_limits:
        _check_size(found, raw, where)
    return found


def _check_finite_numbers(raw: dict, where: str) -> None:
    """Every float anywhere in ``raw`` is finite (iterative: nesting depth cannot overflow)."""
    stack = [("config", raw)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise IhprobeError(
                f"{where}: {key!r} is {value}; numbers in config.json must be finite."
            )
        if isinstance(value, dict):
            stack.extend((str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)


def _check_names(raw: dict, where: str) -> None:
    model_type, architectures = raw.get("model_type"), raw.get("architectures")
    if model_type is not None and not isinstance(model_type, str):
        raise IhprobeError(f"{where}: model_type must be a string (got {model_type!r}).")
    if architectures is not None and not (
        isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)
    ):
        raise IhprobeError(
            f"{where}: architectures must be a list of class names (got {architectures!r})."
        )


def _integer_field(raw: dict, field: Field, where: str) -> int | None:
    key = next((k for k in field.keys if k in raw), None)
    if key is None:
        return None
    value = raw[key]
    if value is None and field.optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise IhprobeError(f"{where}: {key} must be an integer (got {value!r}); fix config.json.")
    if value < field.minimum:
        raise IhprobeError(
            f"{where}: {key} must be at least {field.minimum} (got {value}); fix config.json."
        )
    return value


def _check_epsilons(raw: dict, where: str) -> None:
    for key in EPSILON_KEYS:
        value = raw.get(key)
        if key in raw and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise IhprobeError(f"{where}: {key} must be a number (got {value!r}).")
        if key in raw and not 0 < value < 1:
            raise IhprobeError(
                f"{where}: {key} must be a small positive number such as 1e-5 (got {value})."
            )


def _check_divisibility(found: dict[str, int], where: str) -> None:
    heads, kv = found.get("heads"), found.get("kv_heads")
    hidden = found.get("hidden_size")
    if heads and hidden and "head_dim" not in found and hidden % heads:
        raise IhprobeError(
            f"{where}: hidden size {hidden} is not divisible by {heads} attention heads."
        )
    if heads and kv and heads % kv:
        raise IhprobeError(
            f"{where}: {heads} attention heads are not divisible into {kv} key/value heads."
        )


def _check_causal(raw: dict, where: str) -> None:
    model_type, architectures = raw.get("model_type"), raw.get("architectures") or []
    if not all(str(a).endswith(LM_HEADS) for a in architectures):
        return  # not a language-model head at all: models.causal_lm_config says what to use
    if raw.get("is_causal") is False:
        raise IhprobeError(
            f"{where}: is_causal is false, so attention sees future tokens; induction-head "
            "probes need a causal language model."
        )
    if model_type in CAUSAL_ONLY_AS_DECODER and raw.get("is_decoder") is not True:
        raise IhprobeError(
            f"{where}: a {model_type} model with is_decoder={raw.get('is_decoder')} attends to "
            "future tokens; induction-head probes need a causal language model."
        )


def _check_size(found: dict[str, int], raw: dict, where: str) -> None:
    for name, value in found.items():
        limit = FIELDS[name].maximum
        if value > limit:
            raise IhprobeError(
                f"{where}: {name} {value} exceeds the limit of {limit}; set "
                f"{SIZE_LIMIT_ENV}=1 if this checkpoint really is that large."
            )
    estimate = parameter_estimate(found, tied=bool(raw.get("tie_word_embeddings", True)))
    if estimate > MAX_PARAMETERS:
        raise IhprobeError(
            f"{where}: about {estimate:.3g} parameters, over the limit of {MAX_PARAMETERS:.3g}; "
            f"set {SIZE_LIMIT_ENV}=1 if this checkpoint really is that large."
        )


def parameter_estimate(found: dict[str, int], *, tied: bool = True) -> int:
    """Rough parameter count from the shape fields: embeddings plus attention and MLP per layer.

    Example:
        >>> parameter_estimate({"vocab_size": 10, "hidden_size": 4, "layers": 1})
        296
    """
    d = found.get("hidden_size", 0)
    mlp = found.get("intermediate_size") or 4 * d
    embeddings = found.get("vocab_size", 0) * d * (1 if tied else 2)
    return embeddings + found.get("layers", 0) * (4 * d * d + 3 * d * mlp)
