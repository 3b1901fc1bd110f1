"""ALiBi on the fast path (issue 46): Bloom, MPT and Falcon with ``alibi`` rebuild their
attention in TransformerLens's bridge, where ihprobe's stand-in (``ihprobe.io.alibi``) reads
the pairs with the architecture's own ALiBi tensor as a per-key bias. The stand-in gives the
bridge's own output and weights on the same inputs (each bias keyword, both bias orders, both
mask kinds), and a scan reading pairs equals one reading full patterns, and HF's eager weights."""

from __future__ import annotations

import pytest
import torch
import transformers

import ihprobe
from ihprobe.core.pairs import gather_pairs
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.alibi import ALIBI_BRIDGES, pair_reconstruction
from ihprobe.io.attention import fast_path_reason
from tests.helpers import hf_prefix_matching, save_checkpoint
from tests.integration.test_fast_scores import TOLERANCE, check_pairs_equal_patterns
from tests.integration.test_model_inputs import ARCHITECTURES, V, build

# Bloom (in the parity matrix), Falcon with ``alibi`` (multi-query keys; HF folds the bias into
# the mask it hands the layer) and MPT (its own slopes, a bias over max_seq_len keys, a boolean
# mask of blocked entries, a clip_qkv that bites and its own softmax scale)
ALIBI = {
    "bloom": ARCHITECTURES["bloom"],
    "falcon": ("FalconConfig", "FalconForCausalLM", {**ARCHITECTURES["falcon"][2], "alibi": True}),
    "mpt": (
        "MptConfig",
        "MptForCausalLM",
        {
            "d_model": 32,
            "n_heads": 4,
            "n_layers": 2,
            "max_seq_len": 64,
            "expansion_ratio": 2,
            "attn_config": {"clip_qkv": 0.1, "softmax_scale": 3.0},
            "vocab_size": V,
        },
    ),
}


@pytest.fixture(scope="module")
def alibi_models(tmp_path_factory):
    loaded = {}
    for kind, entry in ALIBI.items():
        folder = save_checkpoint(build(entry), tmp_path_factory.mktemp(kind), id_tokenizer(V))
        loaded[kind] = folder, ihprobe.load(folder)
    return loaded


def test_every_alibi_bridge_has_a_row_and_the_matrix_uses_them(alibi_models):
    kinds = {type(model.blocks[0].attn).__name__ for _, model in alibi_models.values()}
    assert kinds == set(ALIBI_BRIDGES)


@pytest.mark.parametrize("kind", sorted(ALIBI))
def test_alibi_pairs_equal_patterns_and_hfs_eager_weights(kind, alibi_models):
    folder, model = alibi_models[kind]
    assert fast_path_reason(model) is None
    check_pairs_equal_patterns(model, kind)
    half = torch.randint(1, V, (3, 8), generator=torch.Generator().manual_seed(0))
    rows = torch.cat([half, half], dim=1)
    fast = ihprobe.scan(model, ["prefix_matching"], tokens=rows)
    assert fast.settings["attention"] == "pairs"
    reference = hf_prefix_matching(transformers.AutoModelForCausalLM.from_pretrained(folder), rows)
    assert (fast.head["prefix_matching"] - reference).abs().max() <= TOLERANCE


def bias_and_mask(kind: str, batch: int, n: int, heads: int) -> dict:
    """What each architecture hands its attention: the ALiBi keyword and the mask, with row 0
    left-padded by 2 (its own key positions, as Bloom's cumulative sum gives them)."""
    keep = torch.ones(batch, n, dtype=torch.long)
    keep[0, :2] = 0
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    allowed = causal & keep[:, None, None, :].bool()
    allowed[0, :, :2, :2] = torch.eye(2, dtype=torch.bool)  # padding attends to itself
    if kind == "mpt":
        slopes = 2.0 ** -(torch.arange(1, heads + 1) * 8.0 / heads)
        bias = slopes[:, None, None] * torch.arange(1 - 20, 1)[None, None, :]  # 20 > n keys
        return {"position_bias": bias, "attention_mask": ~allowed}
    alibi = transformers.models.bloom.modeling_bloom.build_alibi_tensor(keep, heads, torch.float32)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    return {"alibi": alibi, "attention_mask": additive}


@pytest.mark.parametrize("kind", sorted(ALIBI))
def test_the_stand_in_gives_the_bridges_own_output_and_weights(kind, alibi_models):
    """Falcon's bridge reads an ``alibi`` keyword added before scaling, which HF's Falcon no
    longer passes (it folds the bias into the mask): checked here on the bridge itself."""
    attn = alibi_models[kind][1].blocks[1].attn
    batch, n, heads = 3, 12, attn.config.n_heads
    hidden = torch.randn(batch, n, attn.config.d_model, generator=torch.Generator().manual_seed(2))
    kwargs = bias_and_mask(kind, batch, n, heads)
    seen = []
    with torch.no_grad():
        q, k, v = attn.q(hidden), attn.k(hidden), attn.v(hidden)
        expected, weights = attn._reconstruct_attention(q, k, v, **kwargs)
        out, none = pair_reconstruction(attn, [lambda lazy, hook: seen.append(lazy)])(
            q, k, v, **kwargs
        )
    assert none is None and torch.allclose(out, expected, atol=1e-6)
    queries, keys = torch.tril_indices(n, n)  # every allowed pair
    got = gather_pairs(seen[0], queries, keys)
    assert torch.allclose(got, gather_pairs(weights, queries, keys), atol=1e-6)
    assert weights.std() > 0.01  # the bias and the mask shape the weights


def test_hooks_on_the_split_projections_fire_and_a_pattern_hook_keeps_the_patterns(alibi_models):
    """The bridge's own attention is the seam: its q, k, v and output projections still run."""
    model, seen = alibi_models["bloom"][1], []
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_q", lambda q, hook: seen.append(q.shape))]):
        assert fast_path_reason(model) is None
        scores = ihprobe.scan(model, ["prefix_matching"], n=4, batch=2)
    assert scores.settings["attention"] == "pairs" and seen
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", lambda p, hook: p)]):
        assert "hook_pattern" in fast_path_reason(model)
