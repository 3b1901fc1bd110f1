"""A checkpoint's attention and embedding weights, read by name without building a model.

Weight-only metrics (OV copying, Q/K/V composition) need ``W_E, W_U, W_Q, W_K, W_V, W_O`` and
nothing else. :class:`HeadWeights` gives them in TransformerLens's shapes (``W_Q`` as
``[layer, head, d_model, d_head]``, ``W_O`` as ``[layer, head, d_head, d_model]``, ``W_U`` as
``[d_model, vocab]``), each read from the checkpoint's safetensors the first time it is asked
for (:class:`~ihprobe.io.tensor_reads.TensorReader`), so a metric reads only the tensors it uses:
never the MLPs, never the norms. It stands in for a loaded model wherever only those weights
are read (``composition``, ``copying_scores``); its numbers equal the loaded model's (as
``ihprobe.load(..., processing="none")`` holds them).

Each architecture is one row of :data:`LAYOUTS`: the tensor names and how the attention
weights split into heads.

>>> sorted(LAYOUTS)
['gpt2', 'gpt_neox', 'llama', 'mistral', 'qwen2']
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.io.tensor_reads import TensorReader, Where, remember, whole_digest

WEIGHTS = ("W_E", "W_U", "W_Q", "W_K", "W_V", "W_O")


def _heads_in(w: torch.Tensor, heads: int) -> torch.Tensor:
    """``[heads * d_head, d_model]`` (an ``nn.Linear`` weight) -> ``[head, d_model, d_head]``."""
    return w.reshape(heads, -1, w.shape[-1]).transpose(1, 2)


def _heads_out(w: torch.Tensor, heads: int) -> torch.Tensor:
    """``[d_model, heads * d_head]`` (an output ``nn.Linear``) -> ``[head, d_head, d_model]``."""
    return w.reshape(w.shape[0], heads, -1).permute(1, 2, 0)


def _neox_qkv(w: torch.Tensor, heads: int, part: int) -> torch.Tensor:
    """GPT-NeoX's fused ``query_key_value`` (``[head, (q, k, v), d_head]`` rows) -> one part."""
    return w.reshape(heads, 3, -1, w.shape[-1])[:, part].transpose(1, 2)


def _gpt2_qkv(w: torch.Tensor, heads: int, part: int) -> torch.Tensor:
    """GPT-2's ``c_attn`` Conv1D (``[d_model, (q, k, v) * d_model]``) -> one part."""
    d_model = w.shape[0]
    return w[:, part * d_model : (part + 1) * d_model].reshape(d_model, heads, -1).transpose(0, 1)


def _gpt2_out(w: torch.Tensor, heads: int) -> torch.Tensor:
    """GPT-2's ``c_proj`` Conv1D (``[d_model, d_model]``, input rows) -> ``[head, d_head, ...]``."""
    return w.reshape(heads, -1, w.shape[-1])


@dataclass(frozen=True)
class Layout:
    """Where one architecture keeps the weights a weight-only metric reads.

    ``attn[W]`` is ``(tensor name with {l}, split(tensor, heads) -> [head, ...], heads field)``;
    ``unembed`` falls back to the transposed embedding when the checkpoint ties them.
    """

    embed: str
    unembed: str
    attn: dict[str, tuple[str, Callable, str]]
    config: dict[str, str]  # n_layers, n_heads, n_kv_heads, d_model, d_mlp, d_vocab, n_ctx


_NEOX_QKV = "gpt_neox.layers.{l}.attention.query_key_value.weight"
_GPT2_QKV = "transformer.h.{l}.attn.c_attn.weight"
_LLAMA = "model.layers.{l}.self_attn.{p}_proj.weight"
_LLAMA_CONFIG = {
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "d_model": "hidden_size",
    "d_mlp": "intermediate_size",
    "d_vocab": "vocab_size",
    "n_ctx": "max_position_embeddings",
}
_LLAMA_LAYOUT = Layout(
    "model.embed_tokens.weight",
    "lm_head.weight",
    {
        "W_Q": (_LLAMA.replace("{p}", "q"), _heads_in, "n_heads"),
        "W_K": (_LLAMA.replace("{p}", "k"), _heads_in, "n_kv_heads"),
        "W_V": (_LLAMA.replace("{p}", "v"), _heads_in, "n_kv_heads"),
        "W_O": (_LLAMA.replace("{p}", "o"), _heads_out, "n_heads"),
    },
    _LLAMA_CONFIG,
)
LAYOUTS: dict[str, Layout] = {
    "gpt_neox": Layout(
        "gpt_neox.embed_in.weight",
        "embed_out.weight",
        {
            "W_Q": (_NEOX_QKV, lambda w, h: _neox_qkv(w, h, 0), "n_heads"),
            "W_K": (_NEOX_QKV, lambda w, h: _neox_qkv(w, h, 1), "n_heads"),
            "W_V": (_NEOX_QKV, lambda w, h: _neox_qkv(w, h, 2), "n_heads"),
            "W_O": ("gpt_neox.layers.{l}.attention.dense.weight", _heads_out, "n_heads"),
        },
        {**_LLAMA_CONFIG, "n_kv_heads": "num_attention_heads"},
    ),
    "gpt2": Layout(
        "transformer.wte.weight",
        "lm_head.weight",
        {
            "W_Q": (_GPT2_QKV, lambda w, h: _gpt2_qkv(w, h, 0), "n_heads"),
            "W_K": (_GPT2_QKV, lambda w, h: _gpt2_qkv(w, h, 1), "n_heads"),
            "W_V": (_GPT2_QKV, lambda w, h: _gpt2_qkv(w, h, 2), "n_heads"),
            "W_O": ("transformer.h.{l}.attn.c_proj.weight", _gpt2_out, "n_heads"),
        },
        {
            "n_layers": "n_layer",
            "n_heads": "n_head",
            "n_kv_heads": "n_head",
            "d_model": "n_embd",
            "d_mlp": "n_inner",
            "d_vocab": "vocab_size",
            "n_ctx": "n_positions",
        },
    ),
    "llama": _LLAMA_LAYOUT,
    "mistral": _LLAMA_LAYOUT,
    "qwen2": _LLAMA_LAYOUT,
}


class HeadWeights(torch.nn.Module):
    """``W_E, W_U, W_Q, W_K, W_V, W_O`` of a checkpoint directory, each read when first used.

    ``reader.read`` lists the tensors read; ``digest`` hashes them (names included), so results
    computed from these weights can be cached under it (the digests are remembered in
    ``in_cache``, a cache root; False: nowhere).

    Example:
        >>> weights = HeadWeights("runs/demo/main/checkpoints/step-001000")   # doctest: +SKIP
        >>> copying_scores(weights)       # reads embeddings and attention only  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, in_cache: Where = True):
        super().__init__()
        self.path, self.in_cache = Path(path), in_cache
        raw = json.loads((self.path / "config.json").read_text())
        kind = raw.get("model_type")
        if kind not in LAYOUTS:
            raise IhprobeError(
                f"{self.path} holds a {kind} model; reading head weights by name knows "
                f"{', '.join(sorted(LAYOUTS))}. Load it with ihprobe.load instead."
            )
        self.layout = LAYOUTS[kind]
        sizes = {k: raw.get(v) for k, v in self.layout.config.items()}
        sizes["n_kv_heads"] = sizes["n_kv_heads"] or sizes["n_heads"]
        sizes["d_mlp"] = sizes["d_mlp"] or 4 * sizes["d_model"]
        self.cfg = SimpleNamespace(**sizes, model_name=str(self.path))
        self.reader = TensorReader(self.path)
        self._found: dict[str, torch.Tensor] = {}
        self._raw: dict[str, torch.Tensor] = {}  # tensors read (fused QKV serves three weights)

    def names(self, weight: str) -> list[str]:
        """The checkpoint's tensor names that ``weight`` (one of :data:`WEIGHTS`) is read from."""
        if weight == "W_E":
            return [self.layout.embed]
        if weight == "W_U":
            tied = self.layout.unembed not in self.reader.where
            return [self.layout.embed if tied else self.layout.unembed]
        template = self.layout.attn[weight][0]
        return [template.format(l=layer) for layer in range(self.cfg.n_layers)]

    def weight(self, name: str) -> torch.Tensor:
        """One of :data:`WEIGHTS` in TransformerLens's shape (float32)."""
        if name not in self._found:
            for n in self.names(name):
                if n not in self._raw:
                    self._raw[n] = self.reader.get(n).float()
            tensors = [self._raw[n] for n in self.names(name)]
            if name == "W_E":
                found = tensors[0]
            elif name == "W_U":
                found = tensors[0].T
            else:
                _, split, heads = self.layout.attn[name]
                found = torch.stack([split(t, getattr(self.cfg, heads)) for t in tensors])
            self._found[name] = found
        return self._found[name]

    def load(self, weights=WEIGHTS) -> HeadWeights:
        """Read ``weights`` now (a prefetching thread reads ahead this way); returns self."""
        for name in weights:
            self.weight(name)
        return self

    @property
    def digest(self) -> str:
        """SHA-256 over the digests of the tensors read so far (remembered for the files)."""
        remember(self.path, self.reader.digests, self.in_cache)
        read = {n: self.reader.digests.tensors[n] for n in self.reader.read}
        return whole_digest(read)

    W_E = property(lambda self: self.weight("W_E"))
    W_U = property(lambda self: self.weight("W_U"))
    W_Q = property(lambda self: self.weight("W_Q"))
    W_K = property(lambda self: self.weight("W_K"))
    W_V = property(lambda self: self.weight("W_V"))
    W_O = property(lambda self: self.weight("W_O"))
