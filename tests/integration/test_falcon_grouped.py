"""Falcon's grouped layout (issue 59, item 9): ``new_decoder_architecture`` (Falcon-40B/180B:
``num_kv_heads`` key/value heads, a fused QKV laid out per group) loads, scans, ablates, patches
and composes equal to plain HF eager attention on the same tokens; before the fix each gave a
``split_with_sizes`` traceback."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM

import ihprobe
from ihprobe.circuit.pairs import token_pair
from ihprobe.cli import main
from ihprobe.core.standin import id_tokenizer
from tests.helpers import hf_prefix_matching, save_checkpoint

V, D, H = 64, 32, 4
# (num_kv_heads, extra config): grouped keys with two norms per block (Falcon-40B), one key
# head (multi-query in the new layout), ALiBi, and one norm with biases
pytestmark = pytest.mark.slow  # 24 model builds against HF: about 11 s

LAYOUTS = {
    "grouped": (2, {}),
    "one-kv": (1, {}),
    "alibi": (2, {"alibi": True}),
    "one-norm-bias": (2, {"num_ln_in_parallel_attn": 1, "bias": True}),
}


def falcon(kv: int, extra: dict, seed: int = 0):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.FalconConfig(
            hidden_size=D,
            num_hidden_layers=2,
            num_attention_heads=H,
            num_kv_heads=kv,
            new_decoder_architecture=True,
            vocab_size=V,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
            **extra,
        )
        model = transformers.FalconForCausalLM(config).eval()
    with torch.no_grad():  # sharper attention than the 0.02 init: heads tell apart
        for block in model.transformer.h:
            block.self_attention.query_key_value.weight.mul_(40)
    return model


def rows(seed: int = 0, count: int = 3, half: int = 8) -> torch.Tensor:
    first = torch.randint(1, V, (count, half), generator=torch.Generator().manual_seed(seed))
    return torch.cat([first, first], dim=1)


def hf_head_out(hf, layer: int, head: int, replace: torch.Tensor | None = None):
    """A hook on layer ``layer``'s output projection that zeroes head ``head``'s input slice
    (or sets it from ``replace``, the slice saved from another run) and records the slice."""
    d_head, seen = D // H, {}

    def pre(_module, args):
        (x,) = args
        part = slice(head * d_head, (head + 1) * d_head)
        seen["slice"] = x[..., part].clone()
        x = x.clone()
        x[..., part] = 0 if replace is None else replace
        return (x,)

    return hf.transformer.h[layer].self_attention.dense.register_forward_pre_hook(pre), seen


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def checkpoint(request, tmp_path_factory):
    kv, extra = LAYOUTS[request.param]
    directory = tmp_path_factory.mktemp(request.param) / "falcon"
    save_checkpoint(falcon(kv, extra), directory, id_tokenizer(V))
    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    return directory, hf


def test_loads_and_scans_equal_to_hf(checkpoint):
    directory, hf = checkpoint
    model, tokens = ihprobe.load(directory), rows()
    with torch.no_grad():
        ours, theirs = model(tokens).log_softmax(-1), hf(tokens).logits.log_softmax(-1)
    assert (ours - theirs).abs().max() < 1e-4
    scores = ihprobe.scan(model, ["prefix_matching"], tokens=tokens).head["prefix_matching"]
    reference = hf_prefix_matching(hf, tokens)
    assert (scores - reference).abs().max() < 1e-5
    assert reference.std() > 1e-3  # heads differ, so a head order mix-up would show


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 2)])
def test_ablating_a_head_equals_zeroing_its_slice_in_hf(checkpoint, layer, head):
    directory, hf = checkpoint
    model, tokens = ihprobe.load(directory), rows(1)
    handle, _ = hf_head_out(hf, layer, head)
    try:
        with torch.no_grad():
            expected = hf(tokens).logits
    finally:
        handle.remove()
    with torch.no_grad(), ihprobe.ablate_heads(model, [(layer, head)], mode="zero"):
        ablated = model(tokens)
    assert (ablated - expected).abs().max() < 1e-4
    assert (expected - hf(tokens).logits).abs().max() > 1e-4  # the head mattered


def test_patching_a_head_equals_hf_with_its_clean_slice(checkpoint):
    directory, hf = checkpoint
    model = ihprobe.load(directory)
    clean, corrupted = rows(2), rows(3)
    metric = lambda logits, targets: logits.gather(-1, targets[..., None])[..., 0].mean(-1)  # noqa: E731
    result = ihprobe.patch(model, clean, corrupted, metric)
    pair = token_pair(model, clean, corrupted)
    for layer, head in ((0, 0), (1, 3)):
        with torch.no_grad():  # the clean slice, then the corrupted run with it
            handle, seen = hf_head_out(hf, layer, head, replace=None)
            hf(clean)
            handle.remove()
            handle, _ = hf_head_out(hf, layer, head, replace=seen["slice"])
            logits = hf(corrupted).logits
            handle.remove()
        expected = metric(logits[:, pair.positions], pair.targets).mean()
        assert abs(float(result.values[layer, head]) - float(expected)) < 1e-4


def test_composition_reads_the_groups_hf_uses(checkpoint):
    directory, hf = checkpoint
    model = ihprobe.load(directory)
    fused = hf.transformer.h[1].self_attention.query_key_value.weight.detach()  # [out, d_model]
    kv = hf.config.num_kv_heads
    grouped = fused.view(kv, -1, D // H, D)  # HF's own view: each group's queries, key, value
    w_q = grouped[:, :-2].reshape(H, D // H, D).transpose(1, 2)
    w_k = grouped[:, -2].transpose(1, 2)  # one per group: the bridge holds the K/V heads
    assert torch.allclose(model.W_Q[1], w_q, atol=1e-6)
    assert torch.allclose(model.W_K[1], w_k, atol=1e-6)
    found = ihprobe.composition(model, "k", draws=4)
    assert torch.isfinite(found.values[0, :, 1, :]).all()


def test_info_on_the_cli_prints_the_grouped_model(checkpoint, capsys):
    directory, _ = checkpoint
    assert main(["info", str(directory)]) == 0
    shown = capsys.readouterr().out
    assert "Falcon" in shown or "falcon" in shown
