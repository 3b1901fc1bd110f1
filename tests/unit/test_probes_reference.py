"""``scan`` against a slow, obvious reference that computes every metric from a full
``run_with_cache`` with Python loops, on random tiny models of each architecture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

import ihprobe
from ihprobe.probes import inputs, recall
from ihprobe.probes.attention import VARIED_PAIRS
from tests.helpers import save_checkpoint, tiny_hf_model

N, BATCH, LENGTH = 10, 6, 7


@pytest.fixture(scope="module")
def loaded(tiny_checkpoint):
    arch, directory = tiny_checkpoint
    return arch, ihprobe.load(directory)


def _cache(model, tokens):
    with torch.no_grad():
        return model.run_with_cache(tokens)


def reference_repeated(model, tokens, n):
    """Every repeated-token metric, one (layer, head, row, query) at a time."""
    logits, cache = _cache(model, tokens)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    W_O, W_U = model.W_O.detach(), model.W_U.detach()
    out = {k: torch.zeros(L, H) for k in ("ps", "ps_sd", "prev", "dup", "la", "corr", "dla")}
    ln_w = model.ln_final.w.detach()
    centre = model.cfg.normalization_type == "LN"
    scale = cache["ln_final.hook_scale"]
    for layer in range(L):
        A = cache[f"blocks.{layer}.attn.hook_pattern"]
        z = cache[f"blocks.{layer}.attn.hook_z"]
        for h in range(H):
            ps, prev, dup, la, dla = [], [], [], [], []
            for b in range(tokens.shape[0]):
                row = tokens[b, :n].tolist()
                for q in range(n, 2 * n):
                    ps.append(float(A[b, h, q, q - n + 1]))
                    prev.append(float(A[b, h, q, q - 1]))
                    dup.append(float(A[b, h, q, q - n]))
                    o = z[b, q, h] @ W_O[layer, h]
                    y = int(tokens[b, q - n + 1])
                    s = torch.stack([o @ W_U[:, tok] for tok in row])
                    m = s.mean()
                    t = o @ W_U[:, y]
                    den = torch.relu(s - m).sum()
                    la.append(float(torch.relu(t - m) / den) if den > 0 else 0.0)
                    oc = o - o.mean() if centre else o
                    dla.append(float((oc / scale[b, q, 0] * ln_w) @ W_U[:, y]))
            out["ps"][layer, h] = np.mean(ps)
            out["ps_sd"][layer, h] = np.std(ps)
            out["prev"][layer, h] = np.mean(prev)
            out["dup"][layer, h] = np.mean(dup)
            out["la"][layer, h] = np.mean(la)
            out["corr"][layer, h] = pearsonr(ps, la).statistic
            out["dla"][layer, h] = np.mean(dla)
    ranks, losses = [], []
    for b in range(tokens.shape[0]):
        for q in range(n, 2 * n):
            y = int(tokens[b, q - n + 1])
            ranks.append(int((logits[b, q] > logits[b, q, y]).sum()))
            losses.append(float(torch.nn.functional.cross_entropy(logits[b, q], torch.tensor(y))))
    model_scores = {
        "ar_accuracy": np.mean([r == 0 for r in ranks]),
        "ar_mean_rank": np.mean(ranks),
        "induction_loss": np.mean(losses),
    }
    return out, model_scores


def reference_snippet_score(model, tokens, length, backward, offset=0):
    """Attention from each copy token to where the next token sits, found by token equality
    (``offset`` 1 when the rows start with BOS)."""
    _, cache = _cache(model, tokens)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    out = torch.zeros(L, H)
    for layer in range(L):
        A = cache[f"blocks.{layer}.attn.hook_pattern"]
        for h in range(H):
            values = []
            for b in range(tokens.shape[0]):
                first = tokens[b, offset : offset + length].tolist()
                for p in range(offset + length + 1, offset + 2 * length + 1):
                    k = first.index(int(tokens[b, p]))  # the copy holds s_k here
                    if backward and k >= 1:
                        values.append(float(A[b, h, p, offset + k - 1]))
                    if not backward and k <= length - 2:
                        values.append(float(A[b, h, p, offset + k + 1]))
            out[layer, h] = np.mean(values)
    return out


def reference_copying(model):
    """Eigenvalues of the full vocab x vocab OV circuit of every head."""
    W_E, W_U = model.W_E.detach().double(), model.W_U.detach().double()
    W_V, W_O = model.W_V.detach().double(), model.W_O.detach().double()
    group = model.cfg.n_heads // W_V.shape[1]
    out = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    for layer in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            full = W_E @ W_V[layer, h // group] @ W_O[layer, h] @ W_U
            eig = torch.linalg.eigvals(full)
            out[layer, h] = float(eig.real.sum() / eig.abs().sum())
    return out


def test_scan_matches_reference(loaded):
    arch, model = loaded
    tokens = inputs.repeated_tokens(model, n=N, batch=BATCH, seed=3)
    scores = ihprobe.scan(model, n=N, batch=BATCH, seed=3, snippet_length=LENGTH)
    ref, ref_model = reference_repeated(model, tokens, N)
    expected = {
        "prefix_matching": ref["ps"],
        "prefix_matching_sd": ref["ps_sd"],
        "previous_token": ref["prev"],
        "duplicate_token": ref["dup"],
        "logit_attribution": ref["la"],
        "ps_la_correlation": ref["corr"],
        "direct_logit_attribution": ref["dla"],
        "forward_induction_fixed": reference_snippet_score(
            model, inputs.snippets(model, length=LENGTH, batch=BATCH, seed=3), LENGTH, False
        ),
        "anti_induction": reference_snippet_score(
            model,
            inputs.snippets(model, backward=True, length=LENGTH, batch=BATCH, seed=3),
            LENGTH,
            True,
        ),
    }
    # copying: see the test below; k_composition: tests/test_circuit*.py (against TransformerLens);
    # the varied-length snippet scores: tests/test_probes_snippets.py
    assert set(scores.head) == set(expected) | {"copying", "k_composition", *VARIED_PAIRS}
    for metric, value in expected.items():
        assert torch.allclose(scores.head[metric], value, atol=1e-5, rtol=1e-4), (arch, metric)
    for metric, value in ref_model.items():
        assert scores.model[metric] == pytest.approx(value, abs=1e-5), (arch, metric)
    assert "icl_score" not in scores.model and "icl_score skipped" in scores.settings["notes"][0]


@pytest.mark.parametrize("arch", ["gpt2", "gpt-neox", "llama"])
def test_copying_matches_the_full_ov_circuit(arch, tmp_path, monkeypatch):
    """Small vocabulary, so that the reference can take eigenvalues of the vocab x vocab matrix;
    the vocabulary is cut into chunks of 10 (and a remainder), as a 50k one is."""
    from ihprobe.core.standin import id_tokenizer
    from ihprobe.probes import copying

    monkeypatch.setattr(copying, "VOCAB_CHUNK", 10)
    directory = save_checkpoint(
        tiny_hf_model(arch, vocab_size=64), tmp_path / arch, id_tokenizer(64)
    )
    model = ihprobe.load(directory)
    scores = ihprobe.scan(model, ["copying"])
    assert torch.allclose(scores.head["copying"], reference_copying(model), atol=1e-5)
    assert scores.head["copying"].abs().max() <= 1 and scores.head["copying"].std() > 0


def test_icl_score_matches_reference(loaded, tokenizer):
    _, model = loaded
    text = [" ".join(f"word{i % 37} is {i}" for i in range(j, j + 60)) for j in range(3)]
    scores = ihprobe.scan(model, ["icl_score"], text=text, batch=4)
    early, late = recall.icl_positions(model.cfg.n_ctx)
    stream = []
    for doc in text:
        stream += tokenizer(doc).input_ids + [tokenizer.eos_token_id]
    rows = torch.tensor(stream[: 4 * (late + 1)]).view(4, late + 1)
    with torch.no_grad():
        logits = model(rows)
    ce = torch.nn.functional.cross_entropy
    expected = np.mean(
        [
            float(ce(logits[b, late - 1], rows[b, late]) - ce(logits[b, early - 1], rows[b, early]))
            for b in range(4)
        ]
    )
    assert scores.model["icl_score"] == pytest.approx(expected, abs=1e-5)
    assert scores.settings["icl_positions"] == [early, late]


def test_dla_with_the_rest_of_the_stream_sums_to_the_logit(loaded):
    """TransformerLens's convention: component DLAs (same cached scale) add up to the logit."""
    from ihprobe.probes.attribution import direct_logit_attribution

    _, model = loaded
    tokens = inputs.repeated_tokens(model, n=N, batch=3, seed=1)
    logits, cache = _cache(model, tokens)
    q = recall.query_positions(N)
    y = recall.induction_targets(tokens, N)
    z = torch.stack([cache[f"blocks.{layer}.attn.hook_z"][:, q] for layer in range(2)])
    scale = cache["ln_final.hook_scale"][:, q]
    centre = model.cfg.normalization_type == "LN"
    w = model.ln_final.w.detach()
    heads = direct_logit_attribution(z, model.W_O, model.W_U, y, scale, w, centre).sum(dim=(0, 2))
    head_out = torch.einsum("lbqhe,lhed->bqd", z, model.W_O.detach())
    rest = cache["ln_final.hook_in"][:, q] - head_out
    rest = (rest - rest.mean(-1, keepdim=True) if centre else rest) / scale * w
    u = model.W_U.detach()[:, y].permute(1, 2, 0)  # [b, q, d_model]
    b_ln = getattr(model.ln_final, "b", None)
    bias = (b_ln.detach() * u).sum(-1) if b_ln is not None else 0.0
    b_u = getattr(model, "b_U", None)
    bias = bias + (b_u.detach()[y] if b_u is not None else 0.0)
    total = heads + (rest * u).sum(-1) + bias
    assert torch.allclose(total, logits[:, q].gather(-1, y.unsqueeze(-1)).squeeze(-1), atol=1e-4)


def test_same_seed_same_scores_and_bos_shifts_positions(loaded):
    _, model = loaded
    a = ihprobe.scan(model, ["prefix_matching", "ar_accuracy"], n=N, batch=BATCH, seed=5)
    b = ihprobe.scan(model, ["prefix_matching", "ar_accuracy"], n=N, batch=BATCH, seed=5)
    assert torch.equal(a.head["prefix_matching"], b.head["prefix_matching"])
    tokens = inputs.repeated_tokens(model, n=N, batch=BATCH, seed=5, bos=True)
    given = ihprobe.scan(model, ["prefix_matching"], tokens=tokens, bos=True)
    _, cache = _cache(model, tokens)
    A = cache["blocks.1.attn.hook_pattern"]
    q = torch.arange(N + 1, 2 * N + 1)
    expected = A[:, :, q, q - N + 1].mean(dim=(0, 2))
    assert torch.allclose(given.head["prefix_matching"][1], expected, atol=1e-6)
    assert given.settings["n"] == N and given.settings["tokens"] == "given"
    assert math.isfinite(float(given.head["prefix_matching"].sum()))


def test_chunks_bound_memory_without_changing_scores(loaded):
    _, model = loaded
    one = ihprobe.scan(model, n=N, batch=BATCH, seed=2, snippet_length=LENGTH, chunk=None)
    chunked = ihprobe.scan(model, n=N, batch=BATCH, seed=2, snippet_length=LENGTH, chunk=4)
    for metric, value in one.head.items():
        assert torch.allclose(chunked.head[metric], value, atol=1e-6, equal_nan=True), metric
    for metric, value in one.model.items():
        assert chunked.model[metric] == pytest.approx(value, abs=1e-6), metric
    with pytest.raises(ihprobe.IhprobeError, match="chunk must be"):
        ihprobe.scan(model, chunk=0)


def test_models_without_the_unembed_hook_get_the_same_scores(loaded, monkeypatch):
    """Models without ``unembed.hook_in`` (legacy HookedTransformer) unembed every position;
    scan then slices the logits itself."""
    from ihprobe.probes import engine

    _, model = loaded
    metrics = [
        "ar_accuracy",
        "ar_mean_rank",
        "induction_loss",
        "forward_induction_fixed",
        "icl_score",
    ]
    text = torch.randint(2, 512, (3, model.cfg.n_ctx), generator=torch.Generator().manual_seed(0))
    kwargs = {"n": N, "batch": BATCH, "snippet_length": LENGTH, "text": text}
    sliced = ihprobe.scan(model, metrics, **kwargs)
    monkeypatch.setattr(engine, "UNEMBED_IN", "no.such.hook")
    full = ihprobe.scan(model, metrics, **kwargs)
    assert full.model == pytest.approx(sliced.model, abs=1e-6)
    assert torch.allclose(
        full.head["forward_induction_fixed"], sliced.head["forward_induction_fixed"]
    )


def test_icl_text_as_token_ids(loaded):
    _, model = loaded
    early, late = recall.icl_positions(model.cfg.n_ctx)
    rows = torch.randint(2, 512, (3, late + 5), generator=torch.Generator().manual_seed(0))
    scores = ihprobe.scan(model, ["icl_score"], text=rows)
    with torch.no_grad():
        expected = recall.icl_score_per_row(model(rows), rows, early, late).mean()
    assert scores.model["icl_score"] == pytest.approx(float(expected), abs=1e-5)
    with pytest.raises(ihprobe.IhprobeError, match=f"rows need at least {late + 1}"):
        ihprobe.scan(model, ["icl_score"], text=rows[:, :late])


def test_snippet_scores_with_bos(loaded):
    _, model = loaded
    scores = ihprobe.scan(
        model,
        ["forward_induction_fixed", "anti_induction"],
        batch=BATCH,
        seed=1,
        bos=True,
        snippet_length=LENGTH,
    )
    for metric, backward in (("forward_induction_fixed", False), ("anti_induction", True)):
        rows = inputs.snippets(
            model, backward=backward, length=LENGTH, batch=BATCH, seed=1, bos=True
        )
        assert (rows[:, 0] == model.tokenizer.bos_token_id).all()
        expected = reference_snippet_score(model, rows, LENGTH, backward, offset=1)
        assert torch.allclose(scores.head[metric], expected, atol=1e-5), metric
