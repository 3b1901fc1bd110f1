"""The planted FV model of ``tests/planted_fv.py`` widened to many heads a layer: the same four
working heads (L0H0 previous token, L0H1 two back, L1H0 induction, L1H1 FV) and the same MLP and
unembedding, beside zero heads, so that a layer-matched random baseline has enough distinct
one-head sets for a permutation test to reach p <= 0.05 (the 4-head model has 3 a layer, whose
floor is p = 1/4). The bystander heads are zero: a random draw of them costs nothing, so the
baseline's spread comes only from the draws that hit a working head.

Used by ``tests/unit/test_fv_kinds_wide.py``.
"""

from __future__ import annotations

import math

import torch

from tests.planted_fv import ANCHOR, D_HEAD, HEADS, D, planted_gpt2, word_tokenizer

WIDE_HEADS = 24  # 23 distinct one-head sets a layer: 20 distinct draws give p = 1/21 < 0.05


def wide_planted_gpt2(heads: int = WIDE_HEADS, **kwargs):
    """The planted GPT-2 with ``heads`` heads a layer (``d_model = heads * d_head``): the 4-head
    model's weights in heads 0..3 and residual dimensions 0..127, zero elsewhere; ``kwargs`` go
    to :func:`~tests.planted_fv.planted_gpt2`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    small = planted_gpt2(**kwargs).state_dict()
    d = D_HEAD * heads
    cfg = GPT2Config(
        vocab_size=small["transformer.wte.weight"].shape[0],
        n_embd=d,
        n_layer=2,
        n_head=heads,
        n_inner=small["transformer.h.0.mlp.c_fc.weight"].shape[1],  # the small MLP: all it uses
        n_positions=small["transformer.wpe.weight"].shape[0],
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    model = GPT2LMHeadModel(cfg).eval()
    wide = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    gain = ANCHOR * math.sqrt(2 / d)  # every LayerNorm stays the identity on the features
    for name, value in small.items():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            wide[name].fill_(gain)
        elif name.endswith("attn.c_attn.weight"):  # [d, 3d]: q, k, v blocks of head columns
            for block in range(3):
                wide[name][:D, block * d : block * d + D] = value[:, block * D : (block + 1) * D]
        elif name.endswith("attn.c_proj.weight"):  # [d (heads' z), d]
            wide[name][:D, :D] = value
        elif name.endswith("mlp.c_fc.weight"):  # [d, 4d]
            wide[name][:D, : value.shape[1]] = value
        elif name.endswith("mlp.c_proj.weight"):  # [4d, d]
            wide[name][: value.shape[0], :D] = value
        elif name.endswith("mlp.c_fc.bias"):
            wide[name][: value.shape[0]] = value
        elif name in ("transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight"):
            wide[name][:, :D] = value
        elif value.abs().sum() > 0 and name in wide:
            raise AssertionError(f"{name} is not zero in the planted model; widen it too")
    assert HEADS * D_HEAD == D  # the small model's heads are its first HEADS heads here
    model.load_state_dict(wide)
    return model


def save_wide_planted(directory, **kwargs):
    """The wide planted model and its tokenizer saved as a checkpoint folder."""
    directory.mkdir(parents=True, exist_ok=True)
    wide_planted_gpt2(**kwargs).save_pretrained(directory)
    word_tokenizer().save_pretrained(directory)
    return directory
