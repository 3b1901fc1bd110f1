"""ihprobe.ablate: head sets, statistics, a planted load-bearing head, a random-init null."""

from __future__ import annotations

import math
import statistics as pystats

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel

import ihprobe
from ihprobe.causal.evaluation import METRICS, evaluate_groups, natural_probe, repeated_probe
from ihprobe.causal.head_sets import head_sets, heads_per_layer
from ihprobe.causal.masks import keep_mask
from ihprobe.causal.results import statistics as _statistics
from ihprobe.core.errors import IhprobeError
from ihprobe.io.provenance import COLUMNS
from ihprobe.probes.engine import token_rows
from ihprobe.probes.recall import associative_recall_per_row, induction_loss_per_row
from tests.helpers import blank_gpt2, save_checkpoint, tiny_hf_model

V, C, HEADS, D_HEAD = 32, 32, 4, 32  # planted model: one-hot tokens and positions fit d_head
PLANTED = 2  # the head of the last layer that carries the task
N = C // 2  # the repeated-token probe's half length (its default for n_ctx 32)


def planted_copy_model(layers: int = 2, seed: int = 0) -> GPT2LMHeadModel:
    """GPT-2 whose last layer's head ``PLANTED`` alone solves [A]'s repeated-token task.

    The residual stream has four subspaces of 32 dims: token one-hot, position one-hot, the
    copied token (read by the unembedding) and junk. The planted head attends from position q
    to q - N + 1 (query: position q; key: position j mapped to j + N - 1) and copies that
    token into the copied-token subspace. Every other head has small random weights and writes
    to the junk subspace, which the unembedding ignores; MLPs are off. LayerNorm sees a
    constant number of ones per position, so it only rescales.
    """
    g = torch.Generator().manual_seed(seed)
    d = 4 * D_HEAD
    tok, pos, out, junk = (slice(i * D_HEAD, (i + 1) * D_HEAD) for i in range(4))
    model, state = blank_gpt2(layers, HEADS, D_HEAD, V, C)
    eye = torch.eye(D_HEAD)
    for layer in range(layers):
        attn = state[f"transformer.h.{layer}.attn.c_attn.weight"]  # [d, q|k|v]
        proj = state[f"transformer.h.{layer}.attn.c_proj.weight"]  # [heads * d_head, d]
        for h in range(HEADS):
            q, k, v = (slice(i * d + h * D_HEAD, i * d + (h + 1) * D_HEAD) for i in range(3))
            o = slice(h * D_HEAD, (h + 1) * D_HEAD)
            if layer == layers - 1 and h == PLANTED:
                attn[pos, q] = 2 * eye  # sharp: the score margin is ~20
                attn[pos, k] = torch.diag(torch.ones(D_HEAD - N + 1), N - 1)[:D_HEAD, :D_HEAD]
                attn[tok, v] = eye
                proj[o, out] = eye
            else:
                for part in (q, k, v):
                    attn[:, part] = 0.3 * torch.randn(d, D_HEAD, generator=g)
                proj[o, junk] = 0.01 * torch.randn(D_HEAD, D_HEAD, generator=g)
    state["lm_head.weight"][:, out] = 0.5 * eye  # clean loss ~0.2, not 0
    state["lm_head.weight"][:, tok] = 0.05 * torch.randn(V, D_HEAD, generator=g)  # no ties
    model.load_state_dict(state)
    return model


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    directory = tmp_path_factory.mktemp("planted")
    return ihprobe.load(save_checkpoint(planted_copy_model(), directory))


@pytest.fixture(scope="module")
def random_init(tmp_path_factory):
    directory = tmp_path_factory.mktemp("random-init")
    model = tiny_hf_model("gpt2", vocab_size=V, heads=8, context=C, seed=3)
    return ihprobe.load(save_checkpoint(model, directory))


def _stats(result, metric):
    return result.summary().set_index("metric").loc[metric]


def test_planted_model_solves_the_task_with_one_head(planted):
    scores = ihprobe.scan(planted, metrics=["prefix_matching"]).head["prefix_matching"]
    assert scores[1].argmax() == PLANTED and scores[1, PLANTED] > 0.95


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mean", "zero"])
def test_load_bearing_head_drops_far_more_than_random(planted, mode):
    metrics = ["ar_accuracy", "induction_loss"]
    result = ihprobe.ablate(planted, random=20, mode=mode, batch=20, metrics=metrics)
    assert (1, PLANTED) in result.top_heads
    acc, loss = _stats(result, "ar_accuracy"), _stats(result, "induction_loss")
    assert acc.clean > 0.95  # the planted circuit works...
    assert acc.top < 0.3  # ...and removing its head breaks it
    assert acc.relative_change < -0.7 and abs(acc.random_relative_change_mean) < 0.05
    assert acc.p_value == loss.p_value == 1 / 21  # no draw as harmful: the least p of 20 draws
    assert loss.relative_change > 5
    assert loss.relative_change > 10 * abs(loss.random_relative_change_hi)
    assert loss.load_bearing_index > 2 and loss.load_bearing_lo > 2


@pytest.mark.slow
def test_random_init_model_shows_no_significant_difference(random_init):
    metrics = ["induction_loss", "ar_mean_rank"]
    result = ihprobe.ablate(random_init, random=20, batch=20, metrics=metrics)
    for metric in ("induction_loss", "ar_mean_rank"):
        stats = _stats(result, metric)
        assert stats.p_value > 0.05
        lo, hi = stats.random_relative_change_lo, stats.random_relative_change_hi
        assert lo - 1e-3 <= stats.relative_change <= hi + 1e-3


def test_same_seed_same_result_other_seed_other_draws(random_init):
    kwargs = {"random": 3, "batch": 4, "metrics": ["induction_loss"]}
    a = ihprobe.ablate(random_init, seed=1, **kwargs)
    b = ihprobe.ablate(random_init, seed=1, **kwargs)
    c = ihprobe.ablate(random_init, seed=2, **kwargs)
    assert a.random_heads == b.random_heads and a.top_heads == b.top_heads
    assert torch.equal(a.values["induction_loss"], b.values["induction_loss"])
    assert a.to_frame().equals(b.to_frame())
    assert a.random_heads != c.random_heads


def test_batched_groups_equal_separate_ablated_runs(planted):
    probe = repeated_probe(planted, n=None, batch=6, seed=0, bos=False)
    sets = [[], [(1, PLANTED)], [(0, 1), (1, 3)]]
    keeps = torch.stack([keep_mask(planted, s) for s in sets])
    together = evaluate_groups(planted, probe, keeps, None, max_logits=3 * N * V)  # 6 chunks
    clean = keep_mask(planted, [])[None]
    for g, heads in enumerate(sets):
        with ihprobe.ablate_heads(planted, heads):
            alone = evaluate_groups(planted, probe, clean, None)
        for name in alone:
            assert math.isclose(together[name][g], alone[name][0], abs_tol=1e-5)
    # only the query positions are unembedded: same numbers as the full-logit definitions
    with torch.no_grad():
        logits = planted(probe.tokens)
    acc, rank = associative_recall_per_row(logits, probe.tokens, N)
    loss = induction_loss_per_row(logits, probe.tokens, N)
    assert math.isclose(together["ar_accuracy"][0], acc.mean(), abs_tol=1e-6)
    assert math.isclose(together["ar_mean_rank"][0], rank.mean(), abs_tol=1e-4)
    assert math.isclose(together["induction_loss"][0], loss.mean(), abs_tol=1e-5)


def test_the_load_bearing_interval_reaches_infinity_when_resamples_do_and_is_never_nan():
    from ihprobe.causal.results import BOOTSTRAP, load_bearing_index

    draws = np.array([1.0] * 9 + [2.0])  # about a third of the resamples are all 1: sd 0
    index, lo, hi = load_bearing_index(3.0, draws)
    assert index == pytest.approx((3.0 - 1.1) / np.std(draws, ddof=1))
    resamples = draws[np.random.default_rng(0).integers(0, 10, (BOOTSTRAP, 10))]
    constant = resamples.std(axis=1) == 0
    assert 0.2 < constant.mean() < 0.5  # so the upper 2.5% are all +inf
    by_hand = np.sort(
        np.where(constant, np.inf, (3.0 - resamples.mean(1)) / resamples.std(1, ddof=1))
    )
    assert hi == math.inf and lo == by_hand[math.ceil(0.025 * BOOTSTRAP) - 1]
    finite = load_bearing_index(12.0, np.arange(10.0))  # no infinite resample: interpolated
    assert all(math.isfinite(v) for v in finite)


def test_statistics_against_hand_computed_values():
    values = torch.tensor([2.0, 4.0, 2.2, 2.4, 2.0, 2.6, 5.0])  # a loss: clean, top, 5 random
    stats = _statistics("induction_loss", values)
    random_changes = [0.2, 0.4, 0.0, 0.6, 3.0]
    assert stats["change"] == pytest.approx(2.0) and stats["relative_change"] == pytest.approx(1.0)
    assert stats["random_relative_change_mean"] == pytest.approx(0.42)
    assert stats["random_change_sd"] == pytest.approx(pystats.stdev(random_changes))
    assert stats["p_value"] == pytest.approx(2 / 6)  # (1 + one draw of five as harmful) / 6
    index = (2.0 - pystats.mean(random_changes)) / pystats.stdev(random_changes)
    assert stats["load_bearing_index"] == pytest.approx(index)
    assert stats["load_bearing_lo"] < index < stats["load_bearing_hi"]
    assert "ratio" not in stats
    flipped = _statistics("ar_accuracy", torch.tensor([0.5, 0.1, 0.5, 0.45, 0.05]))
    assert flipped["p_value"] == pytest.approx(2 / 4)  # lower accuracy is worse
    assert flipped["relative_change"] == pytest.approx(-0.8)
    icl = _statistics("icl_score", torch.tensor([-0.01, 0.02, -0.02, 0.0]))
    assert icl["change"] == pytest.approx(0.03) and math.isnan(icl["relative_change"])


@pytest.mark.parametrize(
    "n_heads, top, k", [(12, 0.02, 1), (4, 0.02, 1), (100, 0.02, 2), (10, 0.3, 3), (8, 0.5, 4)]
)
def test_heads_per_layer_rule(n_heads, top, k):
    assert heads_per_layer(n_heads, top) == k


def test_head_sets_pick_top_per_layer_and_random_from_the_rest():
    scores = torch.tensor([[0.1, 0.9, 0.2, 0.3, float("nan"), 0.0], [0.5, 0.5, 0.0, 0.7, 0.6, 0.1]])
    top, draws = head_sets(scores, top=0.3, random=50, seed=0)  # k = ceil(1.8) = 2
    assert top == [(0, 1), (0, 3), (1, 3), (1, 4)]
    for draw in draws:
        assert len(draw) == 4 and not set(draw) & set(top)
        assert [layer for layer, _ in draw] == [0, 0, 1, 1] and len(set(draw)) == 4
    picked = {h for draw in draws for h in draw}
    assert picked == {(lay, h) for lay in (0, 1) for h in range(6)} - set(top)  # all others


def test_input_errors_say_what_to_pass(random_init):
    model = random_init
    for top in (0, -0.1, 1.5):
        with pytest.raises(IhprobeError, match=r"top=.* is not a fraction in \(0, 1\]"):
            ihprobe.ablate(model, top=top)
    with pytest.raises(IhprobeError, match=r"draws must be an integer from 1 to \d+ \(got 0\)"):
        ihprobe.ablate(model, random=0)
    with pytest.raises(IhprobeError, match="unknown head score by='nonsense'.*prefix_matching"):
        ihprobe.ablate(model, by="nonsense")
    with pytest.raises(IhprobeError, match="unknown metric"):
        ihprobe.ablate(model, metrics=["bleu"])
    with pytest.raises(IhprobeError, match="leaving 3 for the random baseline"):
        ihprobe.ablate(model, top=0.6, scope="layer", scores=torch.zeros(2, 8))
    with pytest.raises(IhprobeError, match="no text tokenizer"):
        ihprobe.ablate(model, metrics=["icl_score"], scores=torch.zeros(2, 8))
    with pytest.raises(IhprobeError, match="mode='half'"):
        ihprobe.ablate(model, mode="half")


def test_frame_has_the_shared_columns_and_every_statistic(random_init):
    result = ihprobe.ablate(random_init, random=3, batch=4, metrics=["ar_accuracy"])
    frame = result.to_frame()
    assert tuple(frame.columns) == COLUMNS
    metrics = set(frame.metric)
    assert {"ar_accuracy.clean", "ar_accuracy.p_value", "ar_accuracy.load_bearing_index"} <= metrics
    assert not any(m.endswith((".ratio", "_drop")) for m in metrics)
    # the default top set: the model's 3 highest heads (the CLI's and the demo's rule)
    assert frame.query("metric == 'top_set'").value.sum() == len(result.top_heads) == 3
    assert frame.query("metric == 'random_set'").value.sum() == 3 * 3  # 3 draws of as many
    assert set(METRICS) >= {m.split(".")[0] for m in metrics if "." in m}


@pytest.mark.slow
def test_grouped_kv_model_end_to_end_clean_group_is_the_plain_model(tmp_path, tokenizer):
    from ihprobe.probes.inputs import repeated_tokens
    from ihprobe.probes.recall import icl_positions, icl_score_per_row, induction_loss_per_row

    directory = save_checkpoint(tiny_hf_model("llama", context=64), tmp_path / "llama", tokenizer)
    model = ihprobe.load(directory)
    metrics = ["induction_loss", "natural_loss", "icl_score"]
    result = ihprobe.ablate(model, random=2, batch=6, text_rows=3, metrics=metrics, seed=4)
    assert list(result.values) == metrics
    assert all(torch.isfinite(v).all() for v in result.values.values())
    with torch.no_grad():
        x = repeated_tokens(model, batch=6, seed=5)  # evaluation rows: seed + 1
        loss = induction_loss_per_row(model(x), x, n=x.shape[1] // 2).mean()
        text = token_rows(model, None, rows=3, length=64)
        early, late = icl_positions(64)
        icl = icl_score_per_row(model(text), text, early, late).mean()
    assert math.isclose(result.values["induction_loss"][0], loss, abs_tol=1e-5)
    assert math.isclose(result.values["icl_score"][0], icl, abs_tol=1e-5)
    assert not torch.equal(result.values["natural_loss"][1], result.values["natural_loss"][0])
    short = "a short text " * 12
    fits = (len(tokenizer(short, add_special_tokens=False).input_ids) + 1) // 64  # + EOS
    assert 1 <= fits < 3
    assert token_rows(model, short, rows=3, length=64).shape == (fits, 64)
    with pytest.raises(IhprobeError, match="less than one row of 64"):
        token_rows(model, "too short", rows=32, length=64)
    icl_only = natural_probe(model, None, rows=3, natural_loss=False)  # reads 2 positions
    found = evaluate_groups(model, icl_only, keep_mask(model, [])[None], None)
    assert list(found) == ["icl_score"]
    assert math.isclose(found["icl_score"][0], icl, abs_tol=1e-5)
