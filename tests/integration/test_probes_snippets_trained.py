"""A model trained here on backward snippets ``[S, SEP, reverse(S)]`` learns the causal circuit
the snippet scores name (previous-token head, then duplicate-token head, the reversed copy
predicted) while the anti-induction score stays below its chance level."""

from __future__ import annotations

import pytest
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.probes import attention
from ihprobe.probes.metrics import METRIC_TABLE
from ihprobe.probes.snippets import BEHAVIOUR, FIXED_SCORES
from tests.helpers import save_checkpoint

SNIPPET_METRICS = (*FIXED_SCORES, *attention.VARIED_PAIRS, *BEHAVIOUR)


TRAIN_VOCAB, SHORTEST, LONGEST = 24, 3, 8


def backward_rows(batch: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows packed with ``[S, SEP, reverse(S)]`` (``|S|`` 3-8, SEP a random id outside ``S``, as
    the probe draws it) and labels on the copy's tokens after its first (-100 elsewhere)."""
    context = 2 * (2 * LONGEST + 1)
    x = torch.zeros(batch, context, dtype=torch.long)
    y = torch.full((batch, context), -100)
    for row in range(batch):
        at = 0
        while True:
            n = int(torch.randint(SHORTEST, LONGEST + 1, (1,), generator=g))
            if at + 2 * n + 1 > context:
                break
            ids = torch.randperm(TRAIN_VOCAB, generator=g)[: n + 1]
            s, copy = ids[:n], ids[:n].flip(0)
            x[row, at : at + n], x[row, at + n], x[row, at + n + 1 : at + 2 * n + 1] = (
                s,
                ids[n],
                copy,
            )
            y[row, at + n + 2 : at + 2 * n + 1] = copy[1:]
            at += 2 * n + 1
    return x, y


@pytest.mark.slow
def test_a_model_trained_on_backward_snippets_copies_backward_without_anti_induction(tmp_path):
    """2 layers trained on backward snippets only learn the causal circuit: a previous-token
    head in layer 0, a duplicate-token head in layer 1 reading it, and the reversed copy
    predicted; [B]'s anti-induction score stays below its chance level throughout."""
    cfg = GPTNeoXConfig(
        vocab_size=TRAIN_VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=1,
        intermediate_size=64,
        rotary_pct=1.0,
        max_position_embeddings=4 * LONGEST + 2,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    hf = GPTNeoXForCausalLM(cfg)
    optimizer = torch.optim.AdamW(hf.parameters(), lr=3e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    for _ in range(400):
        x, y = backward_rows(32, g)
        loss = hf(x, labels=y).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model = ihprobe.load(save_checkpoint(hf.eval(), tmp_path, id_tokenizer(TRAIN_VOCAB)))
    scores = ihprobe.scan(
        model, list(SNIPPET_METRICS), snippet_length=LONGEST, snippet_lengths=(SHORTEST, LONGEST)
    )
    copying = scores.model
    assert copying["backward_copy_accuracy"] > 0.9  # chance 1/24
    assert copying["backward_copy_vs_shuffled"] > 2.0  # the order, not only the set of tokens
    assert copying["backward_copy_vs_first_half"] > 2.0
    assert scores.head["backward_previous_token"][0].max() > 0.7
    assert scores.head["backward_duplicate"][1].max() > 0.7
    chance = METRIC_TABLE["anti_induction"].chance(TRAIN_VOCAB, LONGEST)
    assert scores.head["anti_induction"].max() < chance  # [B]'s score: blind to all of it
