"""Attention scores without attention patterns (issue 46): the weights at a few (query, key)
pairs from the queries and keys equal the softmax of the full scores (grouped K heads, scale,
softcap, sliding windows, padding, ALiBi as an additive mask or as a per-key bias); a scan
reading pairs equals one reading full patterns on every architecture of the parity matrix
(``tests/test_model_inputs.py``, Bloom's ALiBi included; more ALiBi in
``test_fast_scores_alibi.py``), or
keeps the patterns where the table says why; a planted
induction head scores high and a uniform one at chance on both paths; on every device."""

from __future__ import annotations

import pytest
import torch

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.pairs import PairAttention, gather_pairs
from ihprobe.core.standin import id_tokenizer
from ihprobe.io import querywise
from ihprobe.io.attention import NO_SEAM, fast_path_reason, pair_pass
from ihprobe.probes import attention, inputs
from ihprobe.probes.metrics import HEAD_METRICS, METRIC_TABLE, PATTERN
from tests.helpers import DEVICES, SameDevice, save_checkpoint, tiny_hf_model
from tests.integration.test_model_inputs import ARCHITECTURES, V, build

TOLERANCE = 1e-5  # float32, the bound; measured differences are below 5e-7
PATTERN_METRICS = [m for m in HEAD_METRICS if METRIC_TABLE[m].hooks == (PATTERN,)]
PATTERN_METRICS.remove("k_composition")  # also weights: read with the previous-token score
# architectures whose HF attention has no seam (io/attention.NO_SEAM): full patterns kept
KEEPS_PATTERNS = {"gpt_neo", "openai-gpt", "xglm"}


def full_softmax(q, k, scale, mask=None, softcap=None, bias=None):
    """The reference: every score, biased, masked, softmaxed: ``[batch, head, query, key]``."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    s = s if softcap is None else softcap * torch.tanh(s / softcap)
    s = s if bias is None else s + bias
    n = q.shape[2]
    if mask is None:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    elif mask.dtype == torch.bool:
        s = s.masked_fill(~mask, -torch.inf)
    else:
        s = s + mask
    return s.softmax(-1)


def random_qk(batch=3, heads=4, kv_heads=2, n=12, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, heads, n, d, generator=g), torch.randn(
        batch, kv_heads, n, d, generator=g
    )


def alibi(heads: int, n: int) -> torch.Tensor:
    """Causal ALiBi as an additive float mask ``[1, head, query, key]``."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)
    distance = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # key - query <= 0
    bias = slopes[:, None, None] * distance[None].float()
    return bias.masked_fill(distance[None] > 0, -torch.inf)[None]


def alibi_keys(batch: int, heads: int, n: int) -> torch.Tensor:
    """ALiBi as Bloom lays it out, per key: ``slope_h * j``, ``[batch, head, 1, key]``, with
    a different offset per row (a row-constant shift the softmax must not see)."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)
    keys = torch.arange(n)[None, :] + 3.0 * torch.arange(batch)[:, None]
    return (slopes[None, :, None] * keys[:, None, :])[:, :, None, :]


def sliding_padded(batch: int, n: int, window: int) -> torch.Tensor:
    """Boolean ``[batch, 1, query, key]``: causal, within ``window``, row 0 left-padded by 2."""
    q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
    mask = ((k <= q) & (q - k < window)).expand(batch, 1, n, n).clone()
    mask[0, :, :, :2] = False
    mask[0, :, :2, :2] = torch.eye(2, dtype=torch.bool)  # padding attends to itself
    return mask


CASES = {
    "causal, grouped K heads": {},
    "softcap and own scale": {"softcap": 0.5, "scale": 0.9},
    "sliding window and padding": {"mask": sliding_padded(3, 12, 4)},
    "ALiBi (additive mask)": {"mask": alibi(4, 12)},
    "ALiBi (bias per key)": {"bias": alibi_keys(3, 4, 12)},
    "ALiBi per key, padding": {"bias": alibi_keys(1, 4, 12), "mask": sliding_padded(3, 12, 12)},
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("chunk", [1, 5, None])
def test_pairs_equal_the_softmax_of_the_full_scores(case, chunk):
    q, k = random_qk()
    options = {"scale": 8**-0.5, **CASES[case]}
    mask, softcap, bias = (options.get(key) for key in ("mask", "softcap", "bias"))
    full = full_softmax(q, k, options["scale"], mask, softcap, bias)
    lazy = PairAttention(q, k, options["scale"], mask, softcap, chunk=chunk, bias=bias)
    shared = (torch.tensor([11, 11, 7, 3, 5]), torch.tensor([10, 0, 7, 4, 5]))  # one masked
    assert torch.allclose(gather_pairs(lazy, *shared), gather_pairs(full, *shared), atol=1e-6)
    per_row = (torch.tensor([[11, 6], [4, 4], [9, 2]]), torch.tensor([[3, 6], [0, 4], [8, 1]]))
    assert torch.allclose(gather_pairs(lazy, *per_row), gather_pairs(full, *per_row), atol=1e-6)
    v = torch.randn(3, 2, 12, 8, generator=torch.Generator().manual_seed(1))
    out = full @ v.repeat_interleave(2, dim=1)
    assert torch.allclose(lazy.output(v), out.transpose(1, 2), atol=1e-6)


def planted_induction(tokens: torch.Tensor, heads: int = 2, strength: float = 30.0):
    """Queries and keys of a planted induction head (head 0: query i matches the key after
    each earlier occurrence of its token) and of a head with zero queries (uniform)."""
    b, n = tokens.shape
    vocab = int(tokens.max()) + 1
    current = torch.nn.functional.one_hot(tokens, vocab).float()
    previous = torch.cat([torch.zeros(b, 1, vocab), current[:, :-1]], dim=1)
    q = torch.stack([current * strength, torch.zeros_like(current)], dim=1)
    k = torch.stack([previous, previous], dim=1)
    return q[:, :heads], k[:, :heads]


def test_a_planted_induction_head_scores_high_and_a_uniform_one_at_chance_on_both_paths():
    g = torch.Generator().manual_seed(0)
    n = 16
    half = torch.stack([torch.randperm(V, generator=g)[:n] for _ in range(4)])
    q, k = planted_induction(torch.cat([half, half], dim=1))
    queries, keys = attention.repeated_pairs(n)["prefix_matching"]
    chance = METRIC_TABLE["prefix_matching"].chance(V, n)
    for pattern in (full_softmax(q, k, 1.0), PairAttention(q, k, 1.0)):
        score = gather_pairs(pattern, queries, keys).mean(dim=(0, 2))
        assert score[0] > 0.99  # the planted head
        assert score[1] == pytest.approx(chance, abs=1e-6)  # uniform: the table's chance level


def check_pairs_equal_patterns(model, kind):
    settings = {"n": 8, "batch": 4, "seed": 1, "snippet_length": 6, "snippet_lengths": (4, 10)}
    fast = ihprobe.scan(model, PATTERN_METRICS, **settings)
    full = ihprobe.scan(model, PATTERN_METRICS, **settings, attention="patterns")
    expected = "patterns" if kind in KEEPS_PATTERNS else "pairs"
    assert (fast.settings["attention"], full.settings["attention"]) == (expected, "patterns")
    assert set(fast.head) == set(PATTERN_METRICS)
    for metric in PATTERN_METRICS:
        assert (fast.head[metric] - full.head[metric]).abs().max() <= TOLERANCE, (kind, metric)
    if kind in KEEPS_PATTERNS:
        assert any("full patterns" in note for note in fast.settings["notes"])


@pytest.mark.parametrize("kind", sorted(ARCHITECTURES))
def test_pairs_equal_patterns_on_every_architecture_of_the_parity_matrix(kind, matrix):
    """Rotary (full, partial, interleaved), ALiBi (Bloom), grouped and multi-query K
    heads, Gemma-2's softcap and scale, QK norms, learned positions: ~0.3 s each."""
    check_pairs_equal_patterns(matrix(kind), kind)


def test_pairs_equal_patterns_inside_a_sliding_window_shorter_than_the_rows(tmp_path):
    entry = ARCHITECTURES["mistral"]
    hf = build((entry[0], entry[1], {**entry[2], "sliding_window": 4}))
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "mistral", id_tokenizer(V)))
    check_pairs_equal_patterns(model, "mistral")


def test_the_pair_pass_reads_what_sdpa_reads_and_puts_the_bridge_back(matrix):
    model = matrix("llama")
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    queries, keys = attention.repeated_pairs(8)["prefix_matching"]
    seen = {}

    def keep(layer):
        return lambda lazy, hook: seen.__setitem__(layer, lazy)

    with torch.no_grad():
        plain = model(rows)
        with pair_pass(model, {0: [keep(0)], 1: [keep(1)]}):
            paired = model(rows)
        again = model(rows)
    assert isinstance(seen[1], PairAttention) and seen[1].key.shape[1] == 2  # grouped K heads
    assert gather_pairs(seen[1], queries, keys).shape == (2, 4, 8)
    assert torch.allclose(plain, paired, atol=1e-5) and torch.equal(plain, again)
    assert "forward" not in model.blocks[0].attn.__dict__
    assert model.blocks[0].attn.original_component.config._attn_implementation == "eager"


def test_bad_attention_requests_are_one_line(matrix):
    model = matrix("llama")
    with pytest.raises(IhprobeError, match="attention='fast' is not one of auto, pairs") as err:
        ihprobe.scan(model, ["prefix_matching"], n=4, batch=2, attention="fast")
    assert "\n" not in str(err.value)
    with pytest.raises(IhprobeError, match="cannot run on this model: GPT-Neo computes"):
        ihprobe.scan(matrix("gpt_neo"), ["prefix_matching"], n=4, batch=2, attention="pairs")
    with pytest.raises(IhprobeError, match="does not reach the bridge's hook_z"):
        ihprobe.scan(matrix("gpt2"), ["logit_attribution"], n=4, batch=2, attention="pairs")
    with pytest.raises(IhprobeError, match="need the full patterns here: the model is not"):
        with pair_pass(torch.nn.Linear(2, 2), {}):
            pass


def test_a_users_pattern_hook_keeps_the_full_patterns(matrix):
    model = matrix("llama")
    assert fast_path_reason(model) is None
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", lambda p, hook: p * 0)]):
        assert "hook_pattern" in fast_path_reason(model)
        scores = ihprobe.scan(model, ["prefix_matching"], n=4, batch=2)
    assert scores.settings["attention"] == "patterns"
    assert scores.head["prefix_matching"][1].abs().max() == 0  # the hook was honoured
    assert set(NO_SEAM) >= {"XGLMAttention", "GPTNeoSelfAttention"}
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_q", lambda q, hook: q)]):
        assert fast_path_reason(model) is None  # HF's LlamaAttention calls the bridge's q
    with matrix("gpt2").hooks(fwd_hooks=[("blocks.0.attn.hook_q", lambda q, hook: q)]):
        reason = fast_path_reason(matrix("gpt2"))  # HF calls c_attn, never the bridge's split q
    assert reason == "a hook is set on blocks.0.attn.q.hook_out, which a pair pass would not fire"


@pytest.fixture(scope="module")
def neox(tmp_path_factory):
    folder = tmp_path_factory.mktemp("neox")
    return save_checkpoint(tiny_hf_model("gpt-neox", vocab_size=128), folder, id_tokenizer(128))


@pytest.fixture(params=["whole rows", "one-row chunks"])
def attention_chunks(request, monkeypatch) -> str:
    """Each HF attention module on whole rows, then on one query row per chunk."""
    if request.param == "one-row chunks":
        monkeypatch.setattr(querywise, "CHUNK_ELEMENTS", {"cpu": 1, "accelerator": 1})
        monkeypatch.setattr(querywise, "MAX_CHUNKS", 10**6)
    return request.param


@pytest.mark.parametrize("device", DEVICES)
def test_pairs_run_on_the_models_device_and_equal_the_cpu_patterns(device, neox, attention_chunks):
    reference = ihprobe.scan(
        ihprobe.load(neox), PATTERN_METRICS, n=8, batch=4, attention="patterns"
    )
    scores = ihprobe.scan(
        ihprobe.load(neox, device=device), PATTERN_METRICS, n=8, batch=4, attention="pairs"
    )
    for metric in PATTERN_METRICS:
        assert scores.head[metric].device.type == "cpu"
        assert torch.allclose(scores.head[metric], reference.head[metric], atol=1e-4), metric


def test_on_a_stand_in_device_the_pair_pass_mixes_no_devices(neox, monkeypatch, attention_chunks):
    from ihprobe.io import models

    monkeypatch.setattr(models, "resolve_device", lambda device, *rest: torch.device("meta"))
    with SameDevice():
        model = ihprobe.load(neox, device="cuda")
        with pytest.raises((RuntimeError, NotImplementedError)) as stopped:
            ihprobe.scan(model, PATTERN_METRICS, n=8, batch=4, attention="pairs")
    assert any(w in str(stopped.value) for w in ("meta tensor", "meta device", "no data"))


def test_the_memory_estimate_of_a_pair_scan_leaves_out_the_patterns(matrix, monkeypatch):
    """A batch whose patterns would not fit is refused with full patterns, and runs as pairs."""
    from ihprobe.core import memory

    model, batch = matrix("llama"), 64
    shape = memory.shape_of(model.cfg, 2 * 8 + 2)  # the rows of n=8: 8 tokens twice, BOS, SEP
    full, pairs = (
        memory.estimate(shape, rows=batch, chunk=25, patterns=p).bytes for p in (True, False)
    )
    assert pairs < full
    monkeypatch.setattr(memory, "limits_on", lambda: True)
    monkeypatch.setattr(memory, "available_bytes", lambda *device: int((full + pairs) / 2))
    with pytest.raises(IhprobeError, match="batch=64 on this model needs about"):
        ihprobe.scan(model, ["prefix_matching"], n=8, batch=batch, attention="patterns")
    scores = ihprobe.scan(model, ["prefix_matching"], n=8, batch=batch)
    assert scores.settings["attention"] == "pairs"


@pytest.mark.parametrize("mode", ["pairs", "patterns"])
def test_the_cli_passes_attention_to_the_scan(tmp_path, monkeypatch, capsys, mode):
    """``ihprobe scan --attention MODE``: the scan runs that path and records it."""
    from ihprobe.cli import main

    source = tmp_path / "tiny"
    save_checkpoint(tiny_hf_model("llama", vocab_size=V, heads=2), source, id_tokenizer(V))
    from ihprobe.dynamics import trajectories  # where the CLI's scan job calls scan

    ran = []
    real_scan = trajectories.scan

    def recording(*args, **kwargs):
        scores = real_scan(*args, **kwargs)
        ran.append(scores.settings["attention"])
        return scores

    monkeypatch.setattr(trajectories, "scan", recording)
    argv = ["scan", str(source), "--metrics", "prefix_matching", "--attention", mode]
    assert main([*argv, "--out", str(tmp_path / "out"), "-q"]) == 0
    assert ran == [mode]
    assert main(["scan", str(source), "--attention", "both"]) == 2
    assert "invalid choice: 'both'" in capsys.readouterr().err
