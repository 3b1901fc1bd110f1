"""Known answers for FV scores (issue 61): a planted FV head ranks first and carries the task's
accuracy, a planted induction head ranks first by prefix matching and low by FV, and a random
model has no FV head. The model is written by hand in ``tests/planted_fv.py``."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import ihprobe
from ihprobe.causal.fv import clean_pass
from ihprobe.causal.fv_result import MIN_EFFECT, RELATIVE_FLOOR
from ihprobe.causal.tasks import Task, make_prompts
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.planted_fv import (
    FV_HEAD,
    INDUCTION_HEAD,
    PAIRS,
    VOCAB,
    save_planted,
    word_tokenizer,
)

TASK = Task("planted", PAIRS)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return ihprobe.load(save_planted(tmp_path_factory.mktemp("planted-fv")))


@pytest.fixture(scope="module")
def result(planted):
    return ihprobe.fv_scores(planted, [TASK], shots=5, prompts=16)


def accuracy(model) -> float:
    prompts = make_prompts(TASK, model.tokenizer, shots=5, prompts=16, max_length=32, seed=3)
    return float(clean_pass(model, prompts)[2].mean())


def test_the_planted_fv_head_ranks_first_and_carries_the_accuracy(planted, result):
    (layer, head, score), second = result.top_heads(2)
    assert (layer, head) == FV_HEAD
    assert score > 0.4 and second[2] < 0.1 * score
    assert result.used == ["planted"] and result.tasks[0].accuracy == 1.0
    assert result.fv_heads()[0][:2] == FV_HEAD
    # the score is its own evidence: patched minus corrupted probability, over the prompts
    evidence = result.tasks[0]
    row = 1 + layer * planted.cfg.n_heads + head
    assert score == pytest.approx(
        float((evidence.probabilities[row] - evidence.probabilities[0]).mean())
    )
    assert accuracy(planted) == 1.0
    with ihprobe.ablate_heads(planted, [FV_HEAD], mode="zero"):
        assert accuracy(planted) == 0.0  # without the task vector the decoy wins
    with ihprobe.ablate_heads(planted, [INDUCTION_HEAD], mode="zero"):
        assert accuracy(planted) == 1.0  # the induction head carries none of it


def test_the_planted_induction_head_leads_prefix_matching_but_not_fv(planted, result):
    ps = ihprobe.scan(planted, ["prefix_matching"]).head["prefix_matching"]
    assert divmod(int(ps.argmax()), planted.cfg.n_heads) == INDUCTION_HEAD
    assert ps[FV_HEAD] < 0.2 < 0.9 < ps[INDUCTION_HEAD]
    fv = result.scores
    assert fv[INDUCTION_HEAD] < 0.05 * fv[FV_HEAD]


def test_without_the_fv_head_no_task_is_done_and_no_head_scores(tmp_path):
    model = ihprobe.load(save_planted(tmp_path / "no-fv", fv=False))
    found = ihprobe.fv_scores(model, [TASK], shots=5, prompts=16)
    assert found.used == [] and found.top_heads() == [] and found.fv_heads() == []
    assert torch.isnan(found.scores).all()
    assert "no FV head" in found.summary()
    assert found.task_scores("planted").max() < 0.05  # per task, still computed: no head helps


def test_a_random_model_has_no_fv_head(tmp_path):
    hf = tiny_hf_model("gpt2", vocab_size=len(VOCAB), context=32)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "random", word_tokenizer()))
    found = ihprobe.fv_scores(model, [TASK], shots=5, prompts=16)
    assert not found.tasks[0].above_chance
    assert found.fv_heads() == [] and "no FV head" in found.summary()
    assert found.task_scores("planted").abs().max() < 0.01


def test_the_effect_floor_keeps_the_fv_head_and_drops_the_induction_head(result):
    fv, induction = (float(result.scores[h]) for h in (FV_HEAD, INDUCTION_HEAD))
    significant = [h[:2] for h in result.fv_heads(min_effect=0, relative=0)]
    # by significance alone the induction head's small steady rise qualifies ...
    assert INDUCTION_HEAD in significant and 0 < induction < RELATIVE_FLOOR * fv
    # ... the floor, a share of the top head's score, leaves the FV head alone
    assert [h[:2] for h in result.fv_heads()] == [FV_HEAD]
    assert result.effect_floor() == pytest.approx(max(MIN_EFFECT, RELATIVE_FLOOR * fv))
    floor = result.effect_floor()
    assert f"score >= {floor:.2g}" in result.summary().splitlines()[-1]


def test_a_random_models_heads_stay_under_the_absolute_floor(tmp_path):
    hf = tiny_hf_model("gpt2", vocab_size=len(VOCAB), context=32, seed=2)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "random", word_tokenizer()))
    found = ihprobe.fv_scores(model, [TASK], shots=5, prompts=16)
    # count the task as done (it is not), so that every head has a score to hold to the floor
    task = found.tasks[0]
    found.tasks[0] = dataclasses.replace(
        task, p_value=0.0, clean_hits=torch.ones_like(task.clean_hits)
    )
    assert found.used == ["planted"] and found.scores.abs().max() < MIN_EFFECT
    assert found.fv_heads() == []
    # the relative floor alone would pass the top head by definition; the absolute one does not
    top = found.top_heads(1)[0][2]
    assert found.effect_floor(min_effect=0) == pytest.approx(RELATIVE_FLOOR * top)
    assert found.effect_floor() == MIN_EFFECT


def test_the_frame_holds_each_task_and_the_average(result):
    frame = result.to_frame()
    assert list(frame.columns[:4]) == ["model", "revision", "step", "tokens"]
    assert set(frame.task) == {"planted", "all"}
    best = frame[(frame.task == "all")].sort_values("score").iloc[-1]
    assert (best["layer"], best["head"]) == FV_HEAD
    assert best.score == pytest.approx(result.top_heads(1)[0][2])
    assert "L1H1" in result.summary().splitlines()[-2]
