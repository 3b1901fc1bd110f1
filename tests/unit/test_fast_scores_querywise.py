"""HF attention over chunks of query rows in a pair pass (issue 46): with one query row per
chunk, a scan equals the pattern path's on every architecture of the parity matrix that takes
pairs (rotary, grouped and multi-query heads, softcap, QK norms, learned positions, parallel
blocks) and inside a sliding window; a hooked layer's chunks run twice (its hooks once, with the
whole row), an unhooked layer's once; a module with a hook inside runs whole rows; everything is
put back afterwards, even on error."""

from __future__ import annotations

import pytest
import torch

import ihprobe
from ihprobe.core.pairs import PairAttention
from ihprobe.core.standin import id_tokenizer
from ihprobe.io import querywise
from ihprobe.io.alibi import alibi_layout
from ihprobe.io.attention import pair_pass
from ihprobe.probes import inputs
from tests.helpers import save_checkpoint
from tests.integration.test_fast_scores import KEEPS_PATTERNS, check_pairs_equal_patterns
from tests.integration.test_model_inputs import ARCHITECTURES, V, build

CHUNKED = sorted(k for k in ARCHITECTURES if k not in KEEPS_PATTERNS and k != "bloom")


@pytest.fixture
def one_row_chunks(monkeypatch) -> list[int]:
    """Chunks of one query row, and the number of chunk calls (cache updates) so far."""
    monkeypatch.setattr(querywise, "CHUNK_ELEMENTS", {"cpu": 1, "accelerator": 1})
    monkeypatch.setattr(querywise, "MAX_CHUNKS", 10**6)
    calls = [0]
    update = querywise.ChunkCache.update

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return update(self, *args, **kwargs)

    monkeypatch.setattr(querywise.ChunkCache, "update", counted)
    return calls


def test_every_architecture_but_the_alibi_bridges_and_the_seamless_is_chunked(matrix):
    for kind in sorted(ARCHITECTURES):
        module = matrix(kind).blocks[0].attn
        seam = alibi_layout(module) is None and kind not in KEEPS_PATTERNS
        assert (querywise.cache_argument(module.original_component) is not None) >= seam, kind
        assert (kind in CHUNKED) == seam, kind


@pytest.mark.parametrize("kind", CHUNKED)
def test_one_row_chunks_give_the_pattern_paths_scores(kind, matrix, one_row_chunks):
    check_pairs_equal_patterns(matrix(kind), kind)
    assert one_row_chunks[0] > 0  # the chunks ran


def test_one_row_chunks_inside_a_sliding_window_shorter_than_the_rows(tmp_path, one_row_chunks):
    entry = ARCHITECTURES["mistral"]
    hf = build((entry[0], entry[1], {**entry[2], "sliding_window": 4}))
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "mistral", id_tokenizer(V)))
    check_pairs_equal_patterns(model, "mistral")
    assert one_row_chunks[0] > 0


def test_a_hooked_layer_runs_its_chunks_twice_and_its_hooks_once_with_the_whole_row(
    matrix, one_row_chunks
):
    model = matrix("llama")
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    seen = []
    with torch.no_grad():
        plain = model(rows)
        with pair_pass(model, {1: [lambda lazy, hook: seen.append(lazy)]}):
            paired = model(rows, use_cache=False)
    n = rows.shape[1]
    assert one_row_chunks[0] == n + 2 * n  # layer 0 once, layer 1 twice
    assert len(seen) == 1 and isinstance(seen[0], PairAttention)
    assert seen[0].query.shape[2] == seen[0].key.shape[2] == n  # the whole row
    assert torch.allclose(plain, paired, atol=1e-5)


def test_a_module_with_a_hook_inside_runs_whole_rows(matrix, one_row_chunks):
    model = matrix("llama")
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    widths = []
    hook = ("blocks.0.attn.q.hook_out", lambda x, hook: widths.append(x.shape[1]))
    with torch.no_grad(), pair_pass(model, {}), model.hooks(fwd_hooks=[hook]):
        model(rows, use_cache=False)
    assert widths == [rows.shape[1]]  # one call, every position
    assert one_row_chunks[0] == rows.shape[1]  # layer 1 still in chunks


def test_a_call_with_a_kv_cache_runs_whole_rows(matrix, one_row_chunks):
    model = matrix("llama")
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    seen = []
    with torch.no_grad(), pair_pass(model, {0: [lambda lazy, hook: seen.append(lazy)]}):
        model(rows)  # HF makes a KV cache: generation, not a probe pass
    assert one_row_chunks[0] == 0 and seen[0].query.shape[2] == rows.shape[1]


def test_the_modules_are_put_back_even_on_error(matrix, one_row_chunks):
    model = matrix("gpt_neox")
    rows = inputs.repeated_tokens(model, n=8, batch=1, seed=0)

    def fail(lazy, hook):
        raise RuntimeError("planted")

    with pytest.raises(RuntimeError, match="planted"), torch.no_grad():
        with pair_pass(model, {0: [fail]}):
            model(rows, use_cache=False)
    assert all("forward" not in b.attn.original_component.__dict__ for b in model.blocks)
    assert not querywise._ACTIVE


class MeanAttention(torch.nn.Module):
    """A planted attention module: each query averages the values it may see. It passes its
    keys through the cache it is given (``uses_cache``) and returns ``(output, None)`` or, with
    ``weights``, its weights too."""

    def __init__(self, uses_cache: bool = True, weights: bool = False):
        super().__init__()
        self.uses_cache, self.weights = uses_cache, weights

    def forward(self, hidden_states, attention_mask=None, cache=None):
        value = hidden_states[:, None]  # [batch, 1 head, pos, d]
        if cache is not None and self.uses_cache:
            _, value = cache.update(value, value, 0)
        if attention_mask is None:
            n = value.shape[2]
            attention_mask = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
        seen = attention_mask.float()
        weights = seen / seen.sum(-1, keepdim=True)
        out = (weights @ value)[:, 0]
        return (out, weights if self.weights else None)


@pytest.mark.parametrize("uses_cache, weights", [(True, False), (False, False), (True, True)])
def test_a_module_is_chunked_only_where_it_reads_its_keys_from_the_cache(
    uses_cache, weights, one_row_chunks
):
    module, done = MeanAttention(uses_cache, weights), []
    hidden = torch.randn(2, 7, 3)
    whole = module(hidden)[0]
    out = querywise.by_query_rows(module, lambda cache, mask: done.append(cache.end))(hidden)
    assert torch.allclose(out[0], whole, atol=1e-6)
    chunked = uses_cache and not weights
    assert done == ([7] if chunked else [])  # the hooks' turn came only in a chunked call
    assert (out[1] is None) == (not weights)
