"""MLPs over chunks of positions in a pair pass (issue 46): the scores equal the pattern
path's on every kind of position-wise MLP bridge (plain, gated, joint gate-up, Bloom's with its
residual) when every position is its own chunk; a hooked MLP runs whole rows; the bridge is put
back afterwards."""

from __future__ import annotations

import warnings

import pytest
import torch

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.io import positionwise
from ihprobe.io.attention import pair_pass
from ihprobe.probes import inputs
from tests.helpers import save_checkpoint
from tests.integration.test_fast_scores import check_pairs_equal_patterns
from tests.integration.test_model_inputs import ARCHITECTURES, V, build

KINDS = {
    "gpt_neox": "MLPBridge",
    "llama": "GatedMLPBridge",
    "phi3": "JointGateUpMLPBridge",
    "bloom": "BloomMLPBridge",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    loaded = {}
    for kind in KINDS:
        folder = tmp_path_factory.mktemp(kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_checkpoint(build(ARCHITECTURES[kind]), folder, id_tokenizer(V))
        loaded[kind] = ihprobe.load(folder)
    return loaded


def count_calls(model, monkeypatch) -> list[int]:
    """Calls of each layer's MLP bridge's own forward (what the chunks call), by layer."""
    calls, layer_of = [0] * model.cfg.n_layers, {id(b.mlp): i for i, b in enumerate(model.blocks)}
    kind = type(model.blocks[0].mlp)
    forward = kind.forward

    def counted(self, *args, **kwargs):
        calls[layer_of[id(self)]] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(kind, "forward", counted)
    return calls


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_position_by_position_mlps_give_the_pattern_paths_scores(kind, models, monkeypatch):
    model = models[kind]
    assert type(model.blocks[0].mlp).__name__ == KINDS[kind]
    monkeypatch.setattr(positionwise, "CHUNK_ELEMENTS", 1)  # one position per chunk
    calls = count_calls(model, monkeypatch)
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    with torch.no_grad(), pair_pass(model, {}):
        model(rows)
    assert calls == [rows.shape[1]] * model.cfg.n_layers  # the chunks ran
    check_pairs_equal_patterns(model, kind)
    assert all("forward" not in block.mlp.__dict__ for block in model.blocks)


def test_a_hooked_mlp_runs_whole_rows(models, monkeypatch):
    model = models["llama"]
    monkeypatch.setattr(positionwise, "CHUNK_ELEMENTS", 1)
    calls, seen = count_calls(model, monkeypatch), []
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)
    hook = ("blocks.1.mlp.hook_out", lambda x, hook: seen.append(x.shape[1]))
    with torch.no_grad(), pair_pass(model, {}), model.hooks(fwd_hooks=[hook]):
        model(rows)
    assert seen == [rows.shape[1]] and calls == [rows.shape[1], 1]


def test_a_wide_batch_gets_larger_chunks_not_more(models, monkeypatch):
    model = models["gpt_neox"]
    monkeypatch.setattr(positionwise, "CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(positionwise, "MAX_CHUNKS", 4)
    calls = count_calls(model, monkeypatch)
    rows = inputs.repeated_tokens(model, n=8, batch=2, seed=0)  # 16 positions: chunks of 4
    with torch.no_grad(), pair_pass(model, {}):
        model(rows)
    assert calls == [4] * model.cfg.n_layers


def test_gpt2s_flat_view_mlp_takes_chunks_of_a_batch(tmp_path, monkeypatch):
    """GPT-2's Conv1D views its input flat; a slice of positions of a batch of 2+ rows is not
    contiguous, so each chunk is made contiguous first (the FV scores' cached pass ran into it
    on a 24-head planted model)."""
    from tests.helpers import tiny_hf_model

    model = ihprobe.load(save_checkpoint(tiny_hf_model("gpt2", vocab_size=V), tmp_path, None))
    rows = inputs.repeated_tokens(model, n=8, batch=3, seed=0)
    with torch.no_grad():
        whole = model(rows)
        monkeypatch.setattr(positionwise, "CHUNK_ELEMENTS", 1)
        monkeypatch.setattr(positionwise, "MAX_CHUNKS", 4)  # chunks of several positions
        calls = count_calls(model, monkeypatch)
        with pair_pass(model, {}):
            chunked = model(rows)
    assert calls == [4] * model.cfg.n_layers  # 4 chunks of several positions, 3 rows each
    torch.testing.assert_close(chunked, whole, rtol=1e-4, atol=1e-4)
