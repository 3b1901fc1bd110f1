"""Fresh HF models for the trainer: each architecture as one row of a table, and the loss.

>>> sorted(ARCHITECTURES)
['gpt-neox', 'gpt2', 'llama']
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
import transformers
from jaxtyping import Float, Int
from transformers import AutoModelForCausalLM


class ModelShape(Protocol):
    """The fields of :class:`~ihprobe.training.config.TrainConfig` that shape the model."""

    arch: str
    layers: int
    heads: int
    kv_heads: int | None
    d_model: int
    d_mlp: int | None
    context: int
    seed: int


@dataclass(frozen=True)
class Architecture:
    """How TrainConfig's sizes map onto one HF config class."""

    config_class: str  # name in `transformers`
    fields: dict[str, str]  # TrainConfig name -> HF config field
    fixed: dict = field(default_factory=dict)  # HF config values every run of this arch gets


_COMMON = {"vocab_size": "vocab_size", "bos": "bos_token_id", "eos": "eos_token_id"}
ARCHITECTURES: dict[str, Architecture] = {
    "gpt-neox": Architecture(
        "GPTNeoXConfig",
        {
            **_COMMON,
            "d_model": "hidden_size",
            "layers": "num_hidden_layers",
            "heads": "num_attention_heads",
            "d_mlp": "intermediate_size",
            "context": "max_position_embeddings",
        },
    ),
    "llama": Architecture(
        "LlamaConfig",  # RoPE, SwiGLU, RMSNorm pre-norm, untied embeddings ([B])
        {
            **_COMMON,
            "d_model": "hidden_size",
            "layers": "num_hidden_layers",
            "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads",
            "d_mlp": "intermediate_size",
            "context": "max_position_embeddings",
        },
        {"tie_word_embeddings": False},
    ),
    "gpt2": Architecture(
        "GPT2Config",
        {
            **_COMMON,
            "d_model": "n_embd",
            "layers": "n_layer",
            "heads": "n_head",
            "d_mlp": "n_inner",
            "context": "n_positions",
        },
        {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},  # no dropout: exact resume
    ),
}


def model_sizes(config: ModelShape, vocab_size: int, special: dict | None = None) -> dict:
    """The architecture-independent description of the model a config trains."""
    eos = (special or {}).get("eos", 0)
    return {
        "arch": config.arch,
        "layers": config.layers,
        "heads": config.heads,
        "kv_heads": config.kv_heads or config.heads,
        "d_model": config.d_model,
        "d_mlp": 4 * config.d_model if config.d_mlp is None else config.d_mlp,
        "context": config.context,
        "vocab_size": vocab_size,
        "bos": eos,
        "eos": eos,
    }


def build_model(config: ModelShape, vocab_size: int, special: dict | None = None):
    """A freshly initialised HF causal LM (seeded by ``config.seed``) with SDPA attention.

    ``config`` is assumed checked (:func:`ihprobe.training.config.check_config`). With
    ``d_mlp=0`` the model is attention-only: each MLP is an empty layer whose output is its bias
    (gpt-neox) or zero (llama).

    Example:
        >>> from ihprobe.training.config import TrainConfig
        >>> m = build_model(TrainConfig(arch="llama", kv_heads=2), vocab_size=128)
        >>> type(m).__name__, m.config.num_key_value_heads
        ('LlamaForCausalLM', 2)
    """
    arch = ARCHITECTURES[config.arch]
    sizes = model_sizes(config, vocab_size, special)
    hf_config = getattr(transformers, arch.config_class)(
        **{hf: sizes[name] for name, hf in arch.fields.items()}, **arch.fixed
    )
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")  # d_mlp = 0
        torch.manual_seed(config.seed)
        return AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")


def causal_lm_loss(model, tokens: Int[torch.Tensor, "batch pos"]) -> Float[torch.Tensor, ""]:
    """Mean next-token cross-entropy over every position of ``tokens`` but the last.

    Example:
        >>> from ihprobe.training.config import TrainConfig
        >>> loss = causal_lm_loss(build_model(TrainConfig(), 64), torch.zeros(2, 8).long())
        >>> loss.shape
        torch.Size([])
    """
    logits = model(input_ids=tokens, use_cache=False).logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
