"""The circuit tools on random tiny models: composition against TransformerLens and against the
random-matrix baseline, batched patching against one-patch-at-a-time hooks, the corruptions,
attribution patching against a finite difference, and input errors."""

from __future__ import annotations

import pytest
import torch

import ihprobe
from ihprobe.circuit.pairs import induction_pair, logit_diff, token_pair
from ihprobe.circuit.patching import attribution_patch, patch, path_patch
from ihprobe.core.errors import IhprobeError
from ihprobe.core.hooks import keep
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.provenance import COLUMNS
from ihprobe.probes.composition import composition, pair_scores
from tests.helpers import save_checkpoint, tiny_hf_model

VOCAB = 128


@pytest.fixture(scope="module", params=["gpt-neox", "llama"])
def random_model(request, tmp_path_factory):
    """A random-init 3-layer model (llama with grouped K/V heads) with an id tokenizer."""
    directory = tmp_path_factory.mktemp(f"random-{request.param}")
    save_checkpoint(
        tiny_hf_model(request.param, vocab_size=VOCAB, context=64, layers=3, seed=1),
        directory,
        id_tokenizer(VOCAB),
    )
    return ihprobe.load(directory)


@pytest.mark.parametrize("kind", ["q", "k", "v"])
def test_composition_equals_transformer_lens(random_model, kind):
    ours = composition(random_model, kind)
    reference = random_model.all_composition_scores(kind.upper()).scores
    earlier = ~ours.raw.isnan()
    assert earlier.sum() == 3 * 16  # (0,1), (0,2), (1,2) layer pairs of 4 x 4 heads
    torch.testing.assert_close(ours.raw[earlier], reference[earlier].float(), rtol=1e-4, atol=0)


def test_random_init_composition_is_within_noise_of_the_baseline(random_model):
    """Random-init weights are Gaussian, so every pair should look like the baseline draws: no
    score beyond 4 SDs of them (48 pairs per kind; P(|z| > 4) ~ 6e-5 each)."""
    for kind in "qkv":
        scores = composition(random_model, kind, draws=200)
        values = scores.values[~scores.values.isnan()]
        assert 0 < scores.baseline_sd < scores.baseline
        assert values.abs().max() < 4 * scores.baseline_sd, kind
        assert values.mean().abs() < 1.5 * scores.baseline_sd  # centred on the baseline


def test_pair_scores_known_answers():
    eye, zero = torch.eye(3), torch.zeros(3, 3)
    orthogonal = torch.diag(torch.tensor([1.0, 0, 0])), torch.diag(torch.tensor([0, 1.0, 0]))
    assert pair_scores((eye, eye), (eye, eye)) == pytest.approx(1 / 3**0.5)
    assert pair_scores((eye, orthogonal[0]), (orthogonal[1], eye)) == 0  # disjoint subspaces
    assert pair_scores((eye, orthogonal[0]), (orthogonal[0], eye)) == pytest.approx(1)
    assert pair_scores((eye, zero), (eye, eye)) == 0  # a head that writes nothing


def test_composition_frame_and_errors(random_model):
    frame = composition(random_model, "k").to_frame()
    assert list(frame.columns[:10]) == [
        *COLUMNS[:4],
        "layer_from",
        "head_from",
        "layer_to",
        "head_to",
        "kind",
        "value",
    ]
    assert set(frame.model) == {ihprobe.io.models.provenance(random_model).model}
    assert len(frame) == 48 and (frame.layer_from < frame.layer_to).all()
    with pytest.raises(ihprobe.IhprobeError, match="kind must be one of"):
        composition(random_model, "x")


def test_corruptions_change_what_they_say(random_model):
    n = 9
    pair = induction_pair(random_model, n=n, batch=4, corruption="second_half")
    assert (pair.clean[:, :n] == pair.clean[:, n:]).all()
    assert (pair.corrupted[:, :n] == pair.clean[:, :n]).all()
    assert not torch.isin(pair.corrupted[0, n:], pair.clean[0]).any()  # nothing to copy
    anchors = induction_pair(random_model, n=n, batch=4, corruption="anchors")
    changed = (anchors.clean != anchors.corrupted).all(0).nonzero().flatten()
    assert changed.tolist() == [0, 2, 4, 6, 8]  # only first-half anchors, for odd n the last too
    assert (anchors.positions == changed + n).all()
    answers = anchors.positions - n + 1  # the token after each anchor: untouched
    assert (anchors.corrupted[:, answers] == anchors.targets).all()


@torch.no_grad()
def test_batched_head_patching_equals_one_patch_at_a_time(random_model):
    pair = induction_pair(random_model, n=8, batch=3, seed=2)
    result = patch(random_model, pair.clean, pair.corrupted, per="head_position")
    clean_z = {}
    random_model.run_with_hooks(
        pair.clean,
        fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: clean_z.setdefault("z", z.clone()))],
    )

    def patched_value(head, pos):
        def hook(z, hook):
            z = z.clone()
            z[:, pos, head] = clean_z["z"][:, pos, head]
            return z

        logits = random_model.run_with_hooks(
            pair.corrupted, fwd_hooks=[("blocks.1.attn.hook_z", hook)]
        )
        given = token_pair(random_model, pair.clean, pair.corrupted)
        return float(logit_diff(logits[:, given.positions], given.targets).mean())

    for head, pos in [(0, 3), (2, 12), (3, 15)]:
        assert result.values[1, head, pos] == pytest.approx(patched_value(head, pos), abs=1e-4)


@torch.no_grad()  # attribution_patch turns gradients on for its own backward pass
def test_attribution_matches_a_small_step_of_the_same_patch(random_model):
    """Attribution is the first-order term: patching a fraction eps of the way from corrupted to
    clean z changes the metric by eps times the attribution, up to O(eps^2)."""
    pair = induction_pair(random_model, n=8, batch=3, seed=3)
    estimate = attribution_patch(random_model, pair.clean, pair.corrupted)
    z = {}
    for name, rows in (("clean", pair.clean), ("corrupted", pair.corrupted)):
        hook = keep(z, name, lambda x: x.clone())
        random_model.run_with_hooks(rows, fwd_hooks=[("blocks.2.attn.hook_z", hook)])
    eps, head = 1e-3, 1
    given = token_pair(random_model, pair.clean, pair.corrupted)

    def metric(step):
        def hook(x, hook):
            x = x.clone()
            x[:, :, head] += step * (z["clean"] - z["corrupted"])[:, :, head]
            return x

        logits = random_model.run_with_hooks(
            pair.corrupted, fwd_hooks=[("blocks.2.attn.hook_z", hook)]
        )
        return float(logit_diff(logits[:, given.positions], given.targets).mean())

    slope = (metric(eps) - metric(-eps)) / (2 * eps)
    assert estimate.values[2, head] - estimate.corrupted == pytest.approx(slope, rel=1e-2, abs=1e-5)


def test_patching_rejects_bad_input(random_model):
    error = ihprobe.IhprobeError
    with pytest.raises(error, match="per must be one of"):
        patch(random_model, per="layer")
    with pytest.raises(error, match="both clean and corrupted"):
        patch(random_model, clean=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(error, match="same shape"):
        patch(
            random_model, torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long)
        )
    with pytest.raises(error, match="corruption must be one of"):
        patch(random_model, corruption="everything")
    with pytest.raises(error, match="earlier layer"):
        path_patch(random_model, [(1, 0)], [(1, 2)], "k")
    with pytest.raises(error, match="sender head must be an integer from 0 to"):
        path_patch(random_model, [(0, 9)], [(1, 2)], "k")
    with pytest.raises(error, match="receiver_input must be"):
        path_patch(random_model, [(0, 0)], [(1, 2)], "z")


@pytest.mark.parametrize("name", ["ihprobe.probes.composition", "ihprobe.circuit.pairs"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_loss_by_position_over_a_run_matches_the_models_own_loss(tmp_path, tokenizer):
    import json

    from ihprobe.circuit.positions import loss_by_position_trajectory, position_losses
    from ihprobe.figures.circuit import loss_by_position_figure

    for step in (0, 10):
        directory = tmp_path / "checkpoints" / f"step-{step:06d}"
        save_checkpoint(tiny_hf_model("gpt-neox", context=64, seed=step), directory, tokenizer)
        (directory / "ihprobe.json").write_text(json.dumps({"step": step, "tokens": 64 * step}))
    table = loss_by_position_trajectory(tmp_path, rows=3)
    assert sorted(table.step.unique()) == [0, 10]
    assert set(table.input) == {"natural", "repeated"}
    assert (table.groupby(["step", "input"]).position.max() == 63).all()  # positions 1..63
    # reference: HF's own mean next-token loss on the same rows equals the mean over positions
    model = ihprobe.load(tmp_path / "checkpoints" / "step-000010")
    rows = torch.randint(0, 512, (3, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model.original_model(rows, labels=rows).loss
    assert position_losses(model, rows).mean() == pytest.approx(float(expected), rel=1e-5)
    figure = loss_by_position_figure(table)
    assert len(figure.data) == 2 * 2  # a line per checkpoint per input


def test_k_composition_metric_reads_only_previous_token_heads(random_model):
    from ihprobe.probes.composition import previous_token_composition

    previous = torch.zeros(3, 4)
    previous[0, 1], previous[1, 3] = 0.9, 0.5  # two previous-token heads, layers 0 and 1
    metric = previous_token_composition(random_model, previous)
    full = composition(random_model, "k").values
    assert metric[0].isnan().all()  # nothing before layer 0
    torch.testing.assert_close(metric[1], full[0, 1, 1])  # only L0H1 feeds layer 1
    torch.testing.assert_close(metric[2], torch.maximum(full[0, 1, 2], full[1, 3, 2]))
    assert previous_token_composition(random_model, torch.zeros(3, 4)).isnan().all()


@torch.no_grad()
def test_path_patching_equals_a_direct_two_pass_patch(random_model):
    """Sender L1H1 -> receiver L2H2 keys, by hand: one corrupted pass with only the sender's z
    clean keeps layer 2's keys (nothing between them to freeze), a second puts the receiver's
    slice back. On Llama the receiver's keys are its K/V group's (head 2 -> K/V head 1)."""
    pair = induction_pair(random_model, n=8, batch=3, seed=4, corruption="anchors")
    found = path_patch(random_model, [(1, 1)], [(2, 2)], "k", n=8, batch=3, seed=4)  # same pair
    clean_z, keys = {}, {}
    random_model.run_with_hooks(
        pair.clean, fwd_hooks=[("blocks.1.attn.hook_z", keep(clean_z, "z", lambda z: z.clone()))]
    )

    def sender_clean(z, hook):
        z = z.clone()
        z[:, :, 1] = clean_z["z"][:, :, 1]
        return z

    random_model.run_with_hooks(
        pair.corrupted,
        fwd_hooks=[
            ("blocks.1.attn.hook_z", sender_clean),
            ("blocks.2.attn.hook_k", keep(keys, "k", lambda k: k.clone())),
        ],
    )
    kv = 2 // (4 // keys["k"].shape[2])

    def receiver_keys(k, hook):
        k = k.clone()
        k[:, :, kv] = keys["k"][:, :, kv]
        return k

    logits = random_model.run_with_hooks(
        pair.corrupted, fwd_hooks=[("blocks.2.attn.hook_k", receiver_keys)]
    )
    expected = logit_diff(logits[:, pair.positions], pair.targets).mean()
    assert found.patched == pytest.approx(float(expected), abs=1e-5)
    assert abs(found.patched - found.corrupted) > 1e-7  # the patch did something (tiny: random)
    # the result says where it came from and writes the long table of every result
    assert found.provenance == ihprobe.io.models.provenance(random_model)
    assert list(found.to_frame().columns[:8]) == list(COLUMNS)
    frame = found.to_frame().set_index("metric")
    assert frame.loc["path_patch", "value"] == pytest.approx(found.patched)
    assert frame.loc["path_patch.fraction", "value"] == pytest.approx(found.fraction)
    assert set(frame["layer"]) == {2} and set(frame["head"]) == {2} and set(frame.input) == {"k"}
    assert set(frame["sender_layer"]) == {1} and set(frame["sender_head"]) == {1}


def test_identical_clean_and_corrupted_rows_make_fractions_undefined_not_nan(random_model):
    rows = induction_pair(random_model, n=6, batch=2).clean
    result = patch(random_model, rows, rows)
    assert result.clean == result.corrupted and torch.isfinite(result.values).all()
    with pytest.raises(IhprobeError, match="fraction restored is undefined"):
        _ = result.fractions
    path = path_patch(random_model, [(0, 0)], [(1, 0)], "k", clean=rows, corrupted=rows)
    with pytest.raises(IhprobeError, match="fraction restored is undefined"):
        _ = path.fraction
