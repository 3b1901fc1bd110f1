"""Known answers: planted attention patterns, hand-built OV weights, uniform attention (chance
levels), TransformerLens ``detect_head`` on the same tokens, and every bad input."""

from __future__ import annotations

import math

import pytest
import torch

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.probes import inputs
from tests.helpers import save_checkpoint, tiny_hf_model

VOCAB = 64


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 2-layer, 4-head GPT-NeoX over 64 ids whose tokenizer is the id stand-in."""
    directory = tmp_path_factory.mktemp("small")
    save_checkpoint(tiny_hf_model("gpt-neox", vocab_size=VOCAB), directory, id_tokenizer(VOCAB))
    return ihprobe.load(directory)


def content_pattern(tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """Attention to (first earlier occurrence of the current token) + shift; to itself when the
    token is new or that key would be outside [0, q]. ``[batch, query_pos, key_pos]``."""
    b, t = tokens.shape
    pattern = torch.zeros(b, t, t)
    for row in range(b):
        for q in range(t):
            earlier = [k for k in range(q) if tokens[row, k] == tokens[row, q]]
            key = earlier[0] + shift if earlier else q
            pattern[row, q, key if 0 <= key <= q else q] = 1.0
    return pattern


def planted(tokens: torch.Tensor) -> torch.Tensor:
    """Layer-1 heads: 0 induction, 1 previous token, 2 anti-induction, 3 duplicate token."""
    b, t = tokens.shape
    previous = torch.zeros(t, t)
    previous[torch.arange(1, t), torch.arange(t - 1)] = 1.0
    previous[0, 0] = 1.0
    heads = [
        content_pattern(tokens, +1),
        previous.expand(b, t, t),
        content_pattern(tokens, -1),
        content_pattern(tokens, 0),
    ]
    return torch.stack(heads, dim=1)


def plant(rows: torch.Tensor):
    def hook(pattern, hook):
        assert pattern.shape[0] == rows.shape[0]
        return planted(rows).to(pattern.dtype)

    return [("blocks.1.attn.hook_pattern", hook)]


def test_planted_patterns_score_one(small):
    n, batch = 8, 4
    tokens = inputs.repeated_tokens(small, n=n, batch=batch, seed=2)
    with small.hooks(fwd_hooks=plant(tokens)):
        scores = ihprobe.scan(
            small, ["prefix_matching", "previous_token", "duplicate_token"], tokens=tokens
        )
    assert scores.head["prefix_matching"][1].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert scores.head["previous_token"][1].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert scores.head["duplicate_token"][1].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert scores.head["prefix_matching"][0].max() < 0.5  # layer 0 untouched: random model
    rows = torch.cat(
        [inputs.snippets(small, backward=d, length=6, batch=batch, seed=2) for d in (False, True)]
    )
    with small.hooks(fwd_hooks=plant(rows)):
        snip = ihprobe.scan(
            small,
            ["forward_induction_fixed", "anti_induction"],
            batch=batch,
            seed=2,
            snippet_length=6,
        )
    assert snip.head["forward_induction_fixed"][1, 0] == 1.0  # an induction head copies forward
    assert snip.head["anti_induction"][1, 2] == 1.0
    assert snip.head["anti_induction"][1, 0] == 0.0  # ... and not backward


def test_planted_prefix_matching_makes_la_and_correlation_defined(small):
    """An induction pattern in a head whose OV circuit copies gives LA far above chance."""
    n = 8
    tokens = inputs.repeated_tokens(small, n=n, batch=4, seed=2)
    with small.hooks(fwd_hooks=plant(tokens)):
        scores = ihprobe.scan(small, ["logit_attribution", "ps_la_correlation"], tokens=tokens)
    la = scores.head["logit_attribution"]
    assert ((la >= 0) & (la <= 1)).all()
    assert torch.isnan(scores.head["ps_la_correlation"][1, 0])  # PS is constant 1 there


def _ov_planted_gpt2(sign_by_head: dict[int, float], tmp_path):
    """GPT-2 (tied W_U = W_E^T) with W_V[h] = sign * W_O[h]^T in layer 0: the circuit's
    eigenvalues are those of sign * W_O (W_E^T W_E) W_O^T, all >= 0 times the sign."""
    hf = tiny_hf_model("gpt2", vocab_size=VOCAB, heads=4, d_model=32)
    d, e = 32, 8
    attn = hf.transformer.h[0].attn
    with torch.no_grad():
        for h, sign in sign_by_head.items():
            w_o = attn.c_proj.weight[h * e : (h + 1) * e, :]  # [d_head, d_model]
            attn.c_attn.weight[:, 2 * d + h * e : 2 * d + (h + 1) * e] = sign * w_o.T
    return ihprobe.load(save_checkpoint(hf, tmp_path / "ov", id_tokenizer(VOCAB)))


def test_copying_planted_weights_give_plus_and_minus_one(tmp_path):
    model = _ov_planted_gpt2({0: 1.0, 1: -1.0}, tmp_path)
    copying = ihprobe.scan(model, ["copying"]).head["copying"]
    assert copying[0, 0] == pytest.approx(1.0, abs=1e-6)
    assert copying[0, 1] == pytest.approx(-1.0, abs=1e-6)
    assert copying[0, 2].abs() < 0.9  # an untouched random head is in between


def _uniform_llama(tmp_path):
    """Llama with zero query weights: every score is 0, so attention is uniform over the past."""
    hf = tiny_hf_model("llama", vocab_size=VOCAB)
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.q_proj.weight.zero_()
    return ihprobe.load(save_checkpoint(hf, tmp_path / "uniform", id_tokenizer(VOCAB)))


def test_chance_levels_under_uniform_attention(tmp_path):
    model = _uniform_llama(tmp_path)
    n = 32
    scores = ihprobe.scan(
        model, ["prefix_matching", "logit_attribution", "ar_accuracy"], n=n, batch=100
    )
    exact = sum(1 / (q + 1) for q in range(n, 2 * n)) / n  # A[q, k] = 1 / (q + 1)
    assert torch.allclose(scores.head["prefix_matching"], torch.full((2, 4), exact), atol=1e-6)
    assert exact == pytest.approx(math.log(2) / n, rel=0.02)  # about ln(2)/n by hand
    la = scores.head["logit_attribution"]
    assert float(la.mean()) == pytest.approx(1 / n, rel=0.05)  # chance: 1/n
    assert torch.allclose(la, torch.full_like(la, 1 / n), rtol=0.1)  # every head near it
    assert scores.model["ar_accuracy"] < 0.1


@pytest.mark.parametrize("bos", [False, True])
def test_detect_head_agrees(tmp_path, bos):
    """detect_head(..., error_measure="mul") = PS * n / T per prompt, T = 2n (+1 with BOS)."""
    from transformer_lens.head_detector import detect_head

    # ids 0..63 have text "<i>"; TransformerLens adds BOS as id 64, inside the 72-row embedding
    hf = tiny_hf_model("gpt-neox", vocab_size=72, seed=3)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "bos", id_tokenizer(VOCAB)))
    model.cfg.default_prepend_bos = bos  # what detect_head's to_tokens does
    n, batch = 12, 3
    tokens = inputs.repeated_tokens(model, n=n, batch=batch, seed=4, bos=bos)
    prompts = ["".join(f"<{i}>" for i in row[int(bos) :].tolist()) for row in tokens]
    assert torch.equal(model.to_tokens(prompts[0])[0].cpu(), tokens[0])  # the same ids
    scores = ihprobe.scan(model, ["prefix_matching", "duplicate_token"], tokens=tokens, bos=bos)
    factor = n / tokens.shape[1]
    with torch.no_grad():
        induction = detect_head(model, prompts, "induction_head")
        duplicate = detect_head(model, prompts, "duplicate_token_head")
    assert torch.allclose(induction, scores.head["prefix_matching"] * factor, atol=1e-6)
    assert torch.allclose(duplicate, scores.head["duplicate_token"] * factor, atol=1e-6)


# ----------------------------------------------------------------------------- bad inputs


def test_bad_inputs_say_how_to_fix_them(small, tmp_path):
    with pytest.raises(IhprobeError, match="largest n that fits is 64"):
        ihprobe.scan(small, ["prefix_matching"], n=65)
    with pytest.raises(IhprobeError, match="largest n that fits is 63"):
        ihprobe.scan(small, ["prefix_matching"], n=64, bos=True)
    tiny_vocab = save_checkpoint(tiny_hf_model("gpt2", vocab_size=20), tmp_path / "v20")
    with pytest.warns(UserWarning, match="no tokenizer"):
        model = ihprobe.load(tiny_vocab)
    with pytest.raises(IhprobeError, match="only 20 usable.*n <= 20"):
        ihprobe.scan(model, ["prefix_matching"], n=21)
    with pytest.raises(IhprobeError, match="valid metrics are prefix_matching, prefix_match"):
        ihprobe.scan(small, ["prefix_matchin"])
    tokens = inputs.repeated_tokens(small, n=5, batch=3)
    tokens[1, 7] = (tokens[1, 7] + 1) % VOCAB
    with pytest.raises(IhprobeError, match="second half of row 1 differs"):
        ihprobe.scan(small, tokens=tokens)
    with pytest.raises(IhprobeError, match="odd number"):
        ihprobe.scan(small, tokens=tokens[:, :9])
    with pytest.raises(IhprobeError, match="needs at least"):
        ihprobe.scan(small, ["icl_score"], text="<1><2>")
