"""FV scores' fast path (one cached corrupted pass, last-token passes per head) equals the
reference loop (one whole patched pass per head) on MHA, parallel-residual, GQA and ALiBi models,
and the patch it applies is real (the patched probabilities move)."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers

import ihprobe
from ihprobe.causal.fv import clean_pass
from ihprobe.causal.fv_fast import fast_probabilities
from ihprobe.causal.fv_reference import patched_probabilities
from ihprobe.causal.tasks import builtin_tasks, make_prompts
from tests.helpers import save_checkpoint, tiny_hf_model

TOLERANCE = 1e-6  # probabilities, float32 on CPU; measured differences are about 1e-9


def bloom(vocab: int = 512):
    """A tiny random Bloom (ALiBi positions)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.BloomConfig(
            vocab_size=vocab, hidden_size=64, n_layer=2, n_head=4, bos_token_id=0, pad_token_id=0
        )
        return transformers.BloomForCausalLM(config).eval()


@pytest.mark.parametrize("arch", ["gpt2", "gpt-neox", "llama", "bloom"])
def test_the_cached_path_equals_one_patched_pass_per_head(arch, tokenizer, tmp_path):
    hf = bloom() if arch == "bloom" else tiny_hf_model(arch)
    with torch.no_grad():  # larger weights: peaked predictions, effects well above rounding
        for parameter in hf.parameters():
            parameter.mul_(4.0)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / arch, tokenizer))
    task = builtin_tasks()[1]  # first_item: prompts of several lengths
    kwargs = {"shots": 3, "prompts": 5, "max_length": model.cfg.n_ctx}
    clean = make_prompts(task, model.tokenizer, **kwargs)
    corrupted = make_prompts(task, model.tokenizer, shuffled=True, **kwargs)
    assert len(set(corrupted.last.tolist())) > 1  # the length groups are exercised
    means, _, _ = clean_pass(model, clean)
    fast = fast_probabilities(model, corrupted, means)
    reference = patched_probabilities(model, corrupted, means)
    assert fast.shape == reference.shape == (1 + 2 * 4, 5)
    assert (fast - reference).abs().max() < TOLERANCE
    effects = reference[1:] - reference[0]
    assert effects.abs().max() > 1e-5  # the patch acts ...
    assert (fast - reference).abs().max() <= 1e-3 * effects.abs().max()  # ... equally in both


def test_fv_scores_by_either_method_agree(tokenizer, tmp_path):
    model = ihprobe.load(save_checkpoint(tiny_hf_model("gpt2"), tmp_path / "m", tokenizer))
    tasks = builtin_tasks()[:2]
    fast = ihprobe.fv_scores(model, tasks, shots=3, prompts=4)
    reference = ihprobe.fv_scores(model, tasks, shots=3, prompts=4, method="reference")
    assert fast.settings["method"] == "fast" and reference.settings["method"] == "reference"
    for a, b in zip(fast.tasks, reference.tasks, strict=True):
        assert torch.equal(a.corrupted.tokens, b.corrupted.tokens)
        assert (a.probabilities - b.probabilities).abs().max() < TOLERANCE
        assert not torch.equal(a.clean.tokens, a.corrupted.tokens)  # labels shuffled
        assert torch.equal(a.clean.answer, a.corrupted.answer)  # same queries, same answers


def test_a_model_the_cached_path_cannot_take_is_scored_by_the_reference_loop(tokenizer, tmp_path):
    model = ihprobe.load(save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "m", tokenizer))
    tasks = builtin_tasks()[:1]
    plain = ihprobe.fv_scores(model, tasks, shots=3, prompts=4, method="reference")
    keep = [("blocks.0.attn.hook_pattern", lambda pattern, hook: pattern)]  # inside attention
    with model.hooks(fwd_hooks=keep):
        found = ihprobe.fv_scores(model, tasks, shots=3, prompts=4)
    assert found.settings["method"] == "reference"  # said, not silently different
    assert torch.equal(found.tasks[0].probabilities, plain.tasks[0].probabilities)
