"""Head masks on hook_z: exact against HF weight surgery, per-row masks, mean ablation, restore."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

import ihprobe
from ihprobe.causal.masks import ablation_hooks, keep_mask, mask_hooks, mean_z
from ihprobe.core.errors import IhprobeError

# Where each architecture keeps W_O of layer {l} in HF, and the weight axis that runs over the
# concatenated head outputs (nn.Linear is [out, in]; GPT-2's Conv1D is [in, out]).
O_PROJ = {
    "gpt-neox": ("gpt_neox.layers.{l}.attention.dense.weight", 1),
    "gpt2": ("transformer.h.{l}.attn.c_proj.weight", 0),
    "llama": ("model.layers.{l}.self_attn.o_proj.weight", 1),
}


def _tokens(batch=3, pos=24, seed=1):
    return torch.randint(2, 512, (batch, pos), generator=torch.Generator().manual_seed(seed))


def _hf_without_head(directory, arch, layer, head, d_head):
    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    name, axis = O_PROJ[arch]
    weight = dict(hf.named_parameters())[name.format(l=layer)]
    with torch.no_grad():
        weight.narrow(axis, head * d_head, d_head).zero_()
    return hf


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 3)])
def test_zero_ablation_equals_zeroed_output_projection(tiny_checkpoint, layer, head):
    arch, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    tokens = _tokens()
    hf = _hf_without_head(directory, arch, layer, head, model.cfg.d_head)
    with torch.no_grad():
        expected = hf(tokens).logits
        clean = model(tokens)
        with ihprobe.ablate_heads(model, [(layer, head)], mode="zero"):
            ablated = model(tokens)
        restored = model(tokens)
    assert (ablated - expected).abs().max() <= 1e-5
    assert (ablated - clean).abs().max() > 1e-3  # the head mattered, so the check has teeth
    assert torch.equal(restored, clean)  # the model is restored on exit


def test_per_row_masks_equal_separate_runs(tiny_checkpoint):
    _, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    tokens = _tokens(batch=2)
    sets = [[], [(0, 0), (1, 2)], [(1, 1)]]
    keeps = torch.stack([keep_mask(model, s) for s in sets])  # [group, layer, head]
    stacked = tokens.repeat(len(sets), 1)
    per_row = keeps.repeat_interleave(len(tokens), dim=0)
    means = mean_z(model, _tokens(batch=4, seed=5))
    with torch.no_grad():
        together = model.run_with_hooks(stacked, fwd_hooks=mask_hooks(per_row, means))
        for g, heads in enumerate(sets):
            alone = model.run_with_hooks(
                tokens, fwd_hooks=ablation_hooks(model, heads, "mean", means)
            )
            rows = together[g * len(tokens) : (g + 1) * len(tokens)]
            assert (rows - alone).abs().max() <= 1e-5


def test_mean_ablation_replaces_z_by_reference_mean(tiny_checkpoint):
    _, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    reference = _tokens(batch=5, pos=16, seed=3)
    _, cache = model.run_with_cache(reference)
    expected = cache["blocks.1.attn.hook_z"].mean(dim=(0, 1))  # [head, d_head]
    assert torch.allclose(mean_z(model, reference, chunk=2)[1], expected, atol=1e-5)
    seen = {}
    with ihprobe.ablate_heads(model, [(1, 2)], mode="mean", reference=reference):
        model.run_with_hooks(
            _tokens(),
            fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: seen.setdefault("z", z))],
        )
    z = seen["z"]
    assert torch.allclose(z[:, :, 2], expected[2].expand_as(z[:, :, 2]), atol=1e-5)
    assert not torch.allclose(z[:, :, 1], expected[1].expand_as(z[:, :, 1]), atol=1e-3)


def test_padding_is_left_out_of_the_mean(tiny_checkpoint):
    _, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    tokens = _tokens(batch=2, pos=10)
    valid = torch.ones_like(tokens, dtype=torch.bool)
    valid[1, 6:] = False
    _, cache = model.run_with_cache(tokens)
    z = cache["blocks.0.attn.hook_z"]
    expected = torch.cat([z[0], z[1, :6]]).mean(0)
    assert torch.allclose(mean_z(model, tokens, valid=valid)[0], expected, atol=1e-5)


def test_bad_heads_modes_and_references_are_errors(tiny_checkpoint):
    _, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    with pytest.raises(IhprobeError, match=r"head \(2, 0\) does not exist.*layer is in 0..1"):
        ablation_hooks(model, [(2, 0)])
    with pytest.raises(IhprobeError, match="mode='half' is not one of"):
        ablation_hooks(model, [(0, 0)], mode="half")
    with pytest.raises(IhprobeError, match="pass reference=tokens"):
        ablation_hooks(model, [(0, 0)], mode="mean")
    with pytest.raises(IhprobeError, match="expected \\(2, 4, 16\\)"):
        ablation_hooks(model, [(0, 0)], mode="mean", reference=torch.zeros(2, 4))
    with pytest.raises(IhprobeError, match="per-row head mask holds 3 rows"):
        model.run_with_hooks(_tokens(batch=2), fwd_hooks=mask_hooks(torch.zeros(3, 2, 4)))
