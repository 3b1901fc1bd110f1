"""A tiny GPT-2 with a planted function-vector head and a planted induction head, written by hand,
and its word-level tokenizer: the known answers of the FV tests (tests/unit/test_fv_planted.py,
tests/integration/test_fv_cli.py).

The task maps ``x0..x7`` to ``y0..y7``. Prompts are ``Q: x A: y ... Q: x_q A:`` (one token a
word). The residual stream holds features in one-hot blocks, each written with a balancing
``-1`` in a sink dimension (so every position's mean is zero) beside two anchors ``+A, -A``
(so every position's standard deviation is the same); LayerNorm gains of ``A * sqrt(2 / d)``
then make each LayerNorm the identity on the features, and the anchors give a constant.

- L0H0, previous token: copies the previous token into ``PREV``.
- L0H1, two back: copies the token two back into ``BACK2`` when it is an ``x``.
- L0 MLP, one neuron per pair: writes ``MATCH = 1`` at ``y_j`` shown after ``x_j``.
- L1H1, the FV head: attends to positions with ``MATCH`` (uniformly where there is none) and
  writes ``TASK = 1`` when it found them: only a prompt whose labels fit the task shows it.
- L1H0, an induction head: attends to the token after earlier copies of the current token and
  copies it (weakly) to the logits.
- Unembedding: ``PREV = x_j`` gives ``y_j`` +3, ``TASK`` gives every ``y`` +6, the token ``A:``
  gives the decoy ``Q:`` +5. With ``TASK`` the answer wins; without it the decoy does.
- L0H2..3 and L1H2..3 are zero.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

PAIRS = tuple((f"x{i}", f"y{i}") for i in range(8))
WORDS = ("<pad>", "Q:", "A:", "The", "cat", "sat", "on", "the", "mat.")
VOCAB = (*WORDS, *(x for x, _ in PAIRS), *(y for _, y in PAIRS))
D, HEADS, CONTEXT, ANCHOR = 128, 4, 32, 100.0
D_HEAD = D // HEADS
FV_HEAD, INDUCTION_HEAD, PREVIOUS_HEAD, BACK2_HEAD = (1, 1), (1, 0), (0, 0), (0, 1)

# residual layout: blocks of one-hot features, their sinks, the anchors
T = 0  # token, 25
POS = T + len(VOCAB)  # position, 32
PREV = POS + CONTEXT  # previous token, 25
COPY = PREV + len(VOCAB)  # the induction head's copy, 25
MATCH, TASK = COPY + len(VOCAB), COPY + len(VOCAB) + 1
SINK = {"T": TASK + 1, "POS": TASK + 2, "PREV": TASK + 3, "COPY": TASK + 4}
SINK |= {"MATCH": TASK + 5, "TASK": TASK + 6, "BACK2": TASK + 7}
BACK2 = TASK + 8  # the x two positions back, 8
PLUS, MINUS = D - 2, D - 1


def word_tokenizer():
    """A word-level fast tokenizer over :data:`VOCAB` that reads text (``The cat sat on the
    mat.`` round-trips), with ``<pad>`` as pad and EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<pad>"))
    inner.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    inner.decoder = decoders.WordPiece(prefix="##")  # joins words with a space
    return PreTrainedTokenizerFast(
        tokenizer_object=inner, pad_token="<pad>", eos_token="<pad>", unk_token="<pad>"
    )


def _id(word: str) -> int:
    return VOCAB.index(word)


def planted_gpt2(
    *, fv: bool = True, induction: bool = True, fv_scale: float = 1.0, decoy: float = 5.0
):
    """The planted GPT-2 (HF, eval mode); ``fv=False`` or ``induction=False`` leaves that head
    zero. ``fv_scale`` scales what the FV head writes; ``decoy`` is the logit ``A:`` gives
    ``Q:`` (below 3 the previous token alone gives the answer, so every prompt that fits the
    context is answered with or without the FV head: a series of checkpoints whose FV head
    grows)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    sizes = {"vocab_size": len(VOCAB), "n_embd": D, "n_layer": 2, "n_head": HEADS}
    ids = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
    cfg = GPT2Config(**sizes, n_positions=CONTEXT, tie_word_embeddings=False, **ids)
    model = GPT2LMHeadModel(cfg).eval()
    s = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    gain = ANCHOR * math.sqrt(2 / D)  # LayerNorm is then the identity on the features
    for name in s:
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            s[name].fill_(gain)
    for t in range(len(VOCAB)):
        s["transformer.wte.weight"][t, [T + t, SINK["T"], PLUS, MINUS]] = torch.tensor(
            [1.0, -1.0, ANCHOR, -ANCHOR]
        )
    for p in range(CONTEXT):
        s["transformer.wpe.weight"][p, [POS + p, SINK["POS"]]] = torch.tensor([1.0, -1.0])
    scale = math.sqrt(D_HEAD)  # GPT-2 divides scores by sqrt(d_head)

    def head(layer: int, h: int):
        """(W_Q, W_K, W_V [d, d_head] views, W_O [d_head, d] view) of one head."""
        w = s[f"transformer.h.{layer}.attn.c_attn.weight"]
        cols = slice(h * D_HEAD, (h + 1) * D_HEAD)
        q, k = w[:, cols], w[:, D + h * D_HEAD : D + (h + 1) * D_HEAD]
        v = w[:, 2 * D + h * D_HEAD : 2 * D + (h + 1) * D_HEAD]
        return q, k, v, s[f"transformer.h.{layer}.attn.c_proj.weight"][cols]

    # L0H0: previous token (query position p matches key position p - 1), copies the token
    q, k, v, o = head(*PREVIOUS_HEAD)
    for p in range(1, CONTEXT):
        q[POS + p, p] = 30.0 * scale
        k[POS + p - 1, p] = 1.0
    for t in range(len(VOCAB)):
        v[T + t, t] = 1.0
        o[t, PREV + t], o[t, SINK["PREV"]] = 1.0, -1.0
    # L0H1: two back (query position p matches key position p - 2), copies an x
    q, k, v, o = head(*BACK2_HEAD)
    for p in range(2, CONTEXT):
        q[POS + p, p] = 30.0 * scale
        k[POS + p - 2, p] = 1.0
    for j, (x, _) in enumerate(PAIRS):
        v[T + _id(x), j] = 1.0
        o[j, BACK2 + j], o[j, SINK["BACK2"]] = 1.0, -1.0
    # L0 MLP: neuron j fires (GELU(5) ~ 5) at y_j shown after x_j
    kappa = 10.0
    fc, fc_b = s["transformer.h.0.mlp.c_fc.weight"], s["transformer.h.0.mlp.c_fc.bias"]
    out = s["transformer.h.0.mlp.c_proj.weight"]
    for j, (_, y) in enumerate(PAIRS):
        fc[T + _id(y), j], fc[BACK2 + j, j], fc_b[j] = kappa, kappa, -1.5 * kappa
        out[j, MATCH], out[j, SINK["MATCH"]] = 0.2, -0.2
    if fv:  # L1H1: attend where MATCH is set, write TASK from it
        q, k, v, o = head(*FV_HEAD)
        q[PLUS, 0] = 15.0 * scale / ANCHOR  # a constant query
        k[MATCH, 0] = 1.0
        v[MATCH, 0] = 1.0
        o[0, TASK], o[0, SINK["TASK"]] = fv_scale, -fv_scale
    if induction:  # L1H0: current token against the previous token of each key; copy
        q, k, v, o = head(*INDUCTION_HEAD)
        for t in range(len(VOCAB)):
            q[T + t, t] = 20.0 * scale
            k[PREV + t, t] = 1.0
            v[T + t, t] = 1.0
            o[t, COPY + t], o[t, SINK["COPY"]] = 1.0, -1.0
    unembed = s["lm_head.weight"]  # [vocab, d]
    for x, y in PAIRS:
        unembed[_id(y), PREV + _id(x)] = 3.0
        unembed[_id(y), TASK] = 6.0
    unembed[_id("Q:"), T + _id("A:")] = decoy
    for t in range(len(VOCAB)):
        unembed[t, COPY + t] = 1.0
    model.load_state_dict(s)
    return model


def save_planted(directory: Path, **kwargs) -> Path:
    """The planted model and its tokenizer saved as a checkpoint folder."""
    directory.mkdir(parents=True, exist_ok=True)
    planted_gpt2(**kwargs).save_pretrained(directory)
    word_tokenizer().save_pretrained(directory)
    return directory
