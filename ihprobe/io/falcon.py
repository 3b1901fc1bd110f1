"""Falcon's grouped layout (``new_decoder_architecture``, Falcon-40B/180B) in the bridge.

TransformerLens's Falcon adapter reads ``multi_query`` (true by default in ``FalconConfig``) as
one key/value head even where the new layout uses ``num_kv_heads`` of them, splits the fused
``query_key_value`` as ``[Q_all, K_all, V_all]``, while HF lays it out per key/value group
(each group's queries, then its key, then its value), and looks for ``ln_attn`` where one norm
serves both branches (``num_ln_in_parallel_attn=1``: HF's ``input_layernorm``).
:class:`FalconAdapter` keeps the adapter's own code and hands it the weights in the order it
expects; registering it (on import of this module, which :mod:`ihprobe.io.models` does) makes
the bridge equal HF's attention.

>>> grouped = torch.arange(8.0).reshape(8, 1)   # 2 groups of (q, q, k, v), d_head 1
>>> contiguous(grouped, kv_heads=2, d_head=1).flatten().tolist()
[0.0, 1.0, 4.0, 5.0, 2.0, 6.0, 3.0, 7.0]
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
from transformer_lens.model_bridge.generalized_components import NormalizationBridge
from transformer_lens.model_bridge.supported_architectures.falcon import (
    FalconArchitectureAdapter,
)


def contiguous(fused: torch.Tensor, *, kv_heads: int, d_head: int) -> torch.Tensor:
    """Rows of a fused QKV weight (or bias) in Falcon's grouped order, ``[kv, (q..., k, v),
    d_head]``, reordered to ``[Q_all, K_all, V_all]``."""
    grouped = fused.reshape(kv_heads, -1, d_head, *fused.shape[1:])
    parts = (grouped[:, :-2], grouped[:, -2:-1], grouped[:, -1:])
    return torch.cat([part.reshape(-1, *fused.shape[1:]) for part in parts])


class FalconAdapter(FalconArchitectureAdapter):
    """TransformerLens's Falcon adapter with the new layout's key/value heads and QKV order."""

    def __init__(self, cfg) -> None:
        grouped = bool(getattr(cfg, "new_decoder_architecture", False))
        multi_query = getattr(cfg, "multi_query", False)
        if grouped:  # HF: num_kv_heads applies in the new layout whatever multi_query says
            cfg.multi_query = False
        try:
            super().__init__(cfg)
        finally:
            if grouped:
                cfg.multi_query = multi_query
        if grouped and getattr(cfg, "num_ln_in_parallel_attn", None) == 1:  # one shared norm
            blocks = self.component_mapping["blocks"].submodules
            blocks["ln1"] = NormalizationBridge(name="input_layernorm", config=self.cfg)

    def _split_falcon_qkv(self, original_attention_component):
        if not self._is_new_arch:
            return super()._split_falcon_qkv(original_attention_component)
        qkv = original_attention_component.query_key_value
        kv_heads = self.cfg.n_key_value_heads or self.cfg.n_heads
        d_head = self.cfg.d_model // self.cfg.n_heads
        reorder = lambda t: None if t is None else contiguous(t, kv_heads=kv_heads, d_head=d_head)  # noqa: E731
        weight, bias = reorder(qkv.weight.detach()), reorder(getattr(qkv, "bias", None))
        flat = SimpleNamespace(query_key_value=SimpleNamespace(weight=weight, bias=bias))
        return super()._split_falcon_qkv(flat)


ArchitectureAdapterFactory.register_adapter("FalconForCausalLM", FalconAdapter)
