"""Causal analysis (issue 12): top sets and baselines, modes against hand-written references,
hooks that must fire, per-head effects, and the load-bearing verdict on a trained model."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

import ihprobe
from ihprobe.causal.head_sets import baseline_sets, head_sets, top_set
from ihprobe.causal.masks import derangement, keep_mask, mask_hooks
from ihprobe.causal.per_head import head_effects
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.figures.ablation import head_effects_figure
from ihprobe.io.provenance import COLUMNS
from ihprobe.probes.engine import recall_probe, run_probe
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.recall import induction_loss_per_row
from tests.helpers import save_checkpoint, tiny_hf_model

N, BATCH, SEED = 8, 6, 2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    model = tiny_hf_model("gpt2", vocab_size=64, heads=4, context=32, seed=1)
    return ihprobe.load(save_checkpoint(model, directory, id_tokenizer(64)))


# ----------------------------------------------------------------------------- modes


def _reference_loss(model, tokens, layer, head, mode):
    """Induction loss with one head ablated, written out with plain hooks on full logits."""
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    z = cache[f"blocks.{layer}.attn.hook_z"]  # [batch, pos, head, d_head]
    source = {
        "zero": torch.zeros_like(z[:, :, head]),
        "mean": z[:, :, head].mean((0, 1)).expand_as(z[:, :, head]),
        "resample": z[derangement(len(tokens), SEED - 1)][:, :, head],  # ablate's seed
        "pattern": z[:, :, head].mean((0, 1)).expand_as(z[:, :, head]),
    }[mode]

    def replace(activation, hook):
        activation = activation.clone()
        activation[:, :, head] = source
        return activation

    hooks = [(f"blocks.{layer}.attn.hook_z", replace)]
    if mode == "pattern":  # every head's attention held at its clean value
        hooks += [(name, lambda p, hook, name=name: cache[name]) for name in names]
    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
    return float(induction_loss_per_row(logits, tokens, N).mean())


@pytest.mark.parametrize("mode", ["zero", "mean", "resample", "pattern"])
@pytest.mark.parametrize("layer, head", [(0, 1), (1, 2)])
def test_each_mode_equals_its_hand_written_reference(tiny, mode, layer, head):
    effects = head_effects(tiny, ["induction_loss"], mode, n=N, batch=BATCH, seed=SEED - 1)
    tokens = repeated_tokens(tiny, n=N, batch=BATCH, seed=SEED)  # the evaluation rows: seed + 1
    found = float(effects.values["induction_loss"][1 + layer * tiny.cfg.n_heads + head])
    assert found == pytest.approx(_reference_loss(tiny, tokens, layer, head, mode), abs=1e-5)


def test_a_hook_that_does_not_fire_is_an_error(tiny):
    deaf = SimpleNamespace(  # a bridge whose hook points silently do nothing
        cfg=tiny.cfg, hook_dict=tiny.hook_dict, run_with_hooks=lambda x, fwd_hooks: tiny(x)
    )
    probe = recall_probe(tiny, repeated_tokens(tiny, n=N, batch=2), N)
    with pytest.raises(IhprobeError, match=r"blocks\.0\.attn\.hook_z.* did not fire"):
        run_probe(deaf, probe, mask_hooks(keep_mask(tiny, [(0, 1)])))


# ----------------------------------------------------------------------------- head sets


SCORES = torch.tensor(
    [
        [0.10, 0.92, 0.20, 0.31, 0.05, 0.40],
        [0.50, 0.55, 0.02, 0.90, 0.60, 0.11],
        [0.07, 0.30, 0.33, 0.01, 0.95, 0.12],
    ]
)


def test_top_sets_per_layer_and_global_by_fraction_or_count():
    assert top_set(SCORES, top=1, scope="global") == [(2, 4)]
    assert top_set(SCORES, top=3, scope="global") == [(0, 1), (1, 3), (2, 4)]
    assert top_set(SCORES, top=0.1, scope="global") == [(0, 1), (2, 4)]  # ceil(1.8) = 2
    assert top_set(SCORES, top=1) == [(0, 1), (1, 3), (2, 4)]  # one per layer
    with pytest.raises(IhprobeError, match="not a fraction in .* nor a count"):
        top_set(SCORES, top=1.5)
    with pytest.raises(IhprobeError, match="scope='model' is not one of 'layer', 'global'"):
        top_set(SCORES, scope="model")


def test_layer_matched_and_global_baselines_match_the_top_set():
    top = top_set(SCORES, top=2, scope="global")
    assert top == [(0, 1), (2, 4)]
    layer = baseline_sets(SCORES, top, baseline="layer-matched", random=30, seed=1)
    whole = baseline_sets(SCORES, top, baseline="global", random=30, seed=1)
    for draw in layer.draws:
        assert sorted(lay for lay, _ in draw) == sorted(lay for lay, _ in top)
        assert not set(draw) & set(top)
    for draw in whole.draws:
        assert len(set(draw)) == 2 and not set(draw) & set(top)
    assert layer.distinct == 25 and layer.repeats  # 5 x 5 sets < 30 draws: repeated, said so
    assert whole.distinct == math.comb(16, 2) and not whole.repeats
    assert len({tuple(d) for d in whole.draws}) == 30  # distinct sets, no replacement
    assert len({tuple(d) for d in layer.draws}) <= 25


def test_score_matched_draws_come_from_the_nearest_stratum():
    top = [(2, 4)]  # 0.95; a stratum holds the max(3, ceil(17 / 4)) = 5 nearest other heads
    found = baseline_sets(SCORES, top, baseline="score-matched", random=5, seed=0)
    assert found.distinct == 5 and not found.repeats
    assert {d[0] for d in found.draws} == {(0, 1), (1, 3), (1, 4), (1, 1), (1, 0)}
    position = torch.arange(18.0).view(3, 6)  # any other score to match on, e.g. entropy
    other = baseline_sets(SCORES, top, baseline="score-matched", random=5, match=position)
    assert {d[0] for d in other.draws} == {(2, 0), (2, 1), (2, 2), (2, 3), (2, 5)}


def _old_head_sets(scores, top, random, seed):
    """The per-layer protocol as it was before scopes and baselines (reference copy)."""
    n_layers, n_heads = scores.shape
    k = max(1, math.ceil(round(top * n_heads, 9)))
    order = torch.sort(-torch.nan_to_num(scores.double(), nan=-math.inf), dim=1, stable=True)[1]
    top_idx = order[:, :k]
    top_set = [(layer, int(h)) for layer in range(n_layers) for h in sorted(top_idx[layer])]
    keys = torch.rand(random, n_layers, n_heads, generator=torch.Generator().manual_seed(seed))
    keys.scatter_(2, top_idx.expand(random, -1, -1), -1.0)
    drawn = keys.topk(k, dim=2).indices.sort(dim=2).values
    draws = [
        [(lay, int(h)) for lay in range(n_layers) for h in drawn[r, lay]] for r in range(random)
    ]
    return top_set, draws


@pytest.mark.parametrize("shape, seed", [((2, 4), 0), ((2, 8), 5), ((12, 12), 3)])
def test_layer_scope_defaults_reproduce_the_per_layer_protocol(shape, seed):
    scores = torch.rand(shape, generator=torch.Generator().manual_seed(seed))
    old_top, old_draws = _old_head_sets(scores, 0.02, 20, seed)
    new_top, new_draws = head_sets(scores, top=0.02, random=20, seed=seed)
    assert new_top == old_top
    if len({tuple(d) for d in old_draws}) == 20 or shape == (2, 4):  # distinct, or too few sets
        assert new_draws == old_draws
    else:  # a repeated old draw is redrawn: the others stay as they were
        first = [d for i, d in enumerate(old_draws) if tuple(d) not in map(tuple, old_draws[:i])]
        assert all(d in new_draws for d in first) and len(set(map(tuple, new_draws))) == 20


# ----------------------------------------------------------------------------- per-head effects


def test_head_effects_table_and_heatmap(tiny):
    effects = head_effects(tiny, ["ar_accuracy", "induction_loss"], n=N, batch=BATCH)
    frame = effects.to_frame()
    assert list(frame.columns[:8]) == [*COLUMNS[:7], "clean"]
    assert len(frame) == 2 * 2 * 4 and {"ablated", "change", "relative_change"} <= set(frame)
    loss = frame[frame.metric == "induction_loss"]
    assert (loss.change == loss.ablated - loss.clean).all()
    harm = dict(((lay, h), v) for lay, h, v in effects.ranking("induction_loss"))
    assert harm[(0, 0)] == pytest.approx(float(effects.change("induction_loss")[0, 0]))
    fig = head_effects_figure(effects, "induction_loss")
    assert fig.data[0].z.shape == (2, 4) and fig.layout.width <= 900


# ----------------------------------------------------------------------------- the verdict


@pytest.fixture(scope="module")
def trained(two_layer_checkpoint):
    return ihprobe.load(two_layer_checkpoint)


@pytest.mark.slow
@pytest.mark.xdist_group("two-layer-trained")
def test_trained_induction_head_is_load_bearing_and_ranked_first(trained):
    ps = ihprobe.scan(trained, ["prefix_matching"]).top_heads("prefix_matching", 1)[0]
    result = ihprobe.ablate(
        trained,
        by="prefix_matching",
        scope="global",
        top=1,
        baseline="layer-matched",
        random=20,
        metrics=["ar_accuracy"],
    )
    assert result.top_heads == [ps[:2]]
    stats = result.summary().set_index("metric").loc["ar_accuracy"]
    # more harmful than every one of the 20 draws: p = 1 / (R + 1), never below it
    assert stats.p_value == pytest.approx(1 / 21)
    # the index is a z-score over only 3 distinct sets, so its size varies with the CPU that
    # trained the model (1.8 to above 2 seen); its bootstrap interval lies above 0 on each
    assert stats.load_bearing_lo > 0
    # 2 x 4 heads: the 20 layer-matched draws repeat 3 distinct sets, so the one verdict rule reads
    # p over those sets (>= 1/4) and cannot say load-bearing; it says why instead
    verdict = result.verdict()
    assert result.settings["draws_repeat"] and stats.p_distinct >= 1 / 4
    assert verdict.answer == "inconclusive" and "3 distinct random sets" in verdict.reason
    ranked = [
        (lay, h) for lay, h, _ in head_effects(trained, ["ar_accuracy"]).ranking("ar_accuracy")
    ]
    # alone, it costs the most of its layer's heads (the layer-0 previous-token head they all
    # read from can cost more, and does where training left several induction heads)
    assert [head for head in ranked if head[0] == ps[0]][0] == ps[:2]


@pytest.mark.slow
@pytest.mark.xdist_group("two-layer-trained")
def test_pattern_mode_tells_the_previous_token_heads_mediated_effect_apart(trained):
    """The previous-token head works through the induction heads' keys (K-composition): with
    every attention pattern held at its clean value, ablating it costs little."""
    previous = ihprobe.scan(trained, ["previous_token"]).top_heads("previous_token", 1)[0][:2]
    mean = head_effects(trained, ["ar_accuracy"], "mean").harm("ar_accuracy")
    held = head_effects(trained, ["ar_accuracy"], "pattern").harm("ar_accuracy")
    assert previous[0] == 0 and mean[previous] > 0.2  # it matters...
    assert held[previous] < mean[previous] / 4  # ...through the attention of later heads
    assert torch.allclose(mean[1], held[1], atol=1e-6)  # nothing downstream of the last layer


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["layer", "global"])
def test_random_init_is_not_significant_under_any_baseline(tmp_path, scope):
    model = tiny_hf_model("gpt2", vocab_size=32, heads=8, context=32, seed=3)
    model = ihprobe.load(save_checkpoint(model, tmp_path / "random", id_tokenizer(32)))
    for baseline in ("layer-matched", "global", "score-matched"):
        result = ihprobe.ablate(
            model,
            scope=scope,
            top=0.1,
            baseline=baseline,
            random=20,
            batch=20,
            metrics=["induction_loss", "ar_mean_rank"],
        )
        for row in result.summary().itertuples():
            assert row.p_value > 0.05, (scope, baseline, row.metric)
            assert row.load_bearing_lo < 2, (scope, baseline, row.metric)
        assert result.verdict().answer == "no induction heads to test"  # max PS below 0.3
