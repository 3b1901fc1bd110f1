"""`ihprobe metrics`: every metric with its computed chance level, held to a model whose attention
is uniform, and the docs page rendered from the same table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import ihprobe
from ihprobe.causal.tasks import Task
from ihprobe.cli import main
from ihprobe.core.standin import id_tokenizer
from ihprobe.probes.glossary import DEFAULT_PROBE, MEANING, chance_level, glossary_rows, markdown
from ihprobe.probes.metrics import METRIC_TABLE, SCAN_METRICS
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.planted_fv import PAIRS, word_tokenizer
from tests.planted_fv import VOCAB as WORDS

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 64
FORMULAS = {"1/V": lambda v: 1 / v, "3/V": lambda v: 3 / v, "(V - 1)/2": lambda v: (v - 1) / 2}
FORMULAS["ln V"] = math.log
# the metrics a head with uniform attention (every query score zero) scores at chance by
# definition; the rest need weights (copying, composition), a correlation or natural text
UNIFORM = [
    m
    for m in SCAN_METRICS
    if METRIC_TABLE[m].level == "head" and METRIC_TABLE[m].hooks == ("pattern",)
]
UNIFORM = [m for m in UNIFORM if chance_level(m) is not None and m != "k_composition"]


def test_the_docs_page_is_what_the_glossary_renders():
    assert (ROOT / "docs/methods/metrics.md").read_text() == markdown()


def test_every_metric_has_a_meaning_and_every_scan_metric_a_row():
    assert set(MEANING) == set(METRIC_TABLE)
    names = [row.name for row in glossary_rows()]
    assert set(SCAN_METRICS) <= set(names)
    assert all(row.measures and row.source for row in glossary_rows())


@pytest.mark.parametrize("name", [m for m in METRIC_TABLE if METRIC_TABLE[m].chance])
def test_a_formula_is_given_exactly_where_chance_depends_on_the_vocabulary(name):
    n = DEFAULT_PROBE.get(METRIC_TABLE[name].family, DEFAULT_PROBE["repeated"])
    chance = METRIC_TABLE[name].chance
    depends = chance(64, n) != chance(50_257, n)
    formula = MEANING[name].formula
    assert depends == (formula is not None)
    if formula is not None:  # the text says what the table computes
        for vocab in (64, 50_257):
            assert FORMULAS[formula](vocab) == pytest.approx(chance(vocab, n))
            assert chance_level(name, vocab) == pytest.approx(chance(vocab, n))


def test_the_chance_claims_of_the_head_rule_are_computed():
    """Uniform attention is not below 0.05 at n = 10 (the head rule's docstring said so)."""
    ps = METRIC_TABLE["prefix_matching"].chance
    assert ps(VOCAB, 10) == pytest.approx(sum(1 / (q + 1) for q in range(10, 20)) / 10)
    assert ps(VOCAB, 10) > 0.05 > ps(VOCAB, 25) > ps(VOCAB, 50)


def _uniform_model(tmp_path, *, unembed: bool):
    """Llama (context 128, so the default probe fits) with zero query weights: every attention
    score is 0 and attention uniform over the past; without ``unembed`` also a zero unembedding,
    so every logit is 0."""
    hf = tiny_hf_model("llama", vocab_size=VOCAB)
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.q_proj.weight.zero_()
        if not unembed:
            hf.lm_head.weight.zero_()
    name = "uniform" if unembed else "uniform-flat"
    return ihprobe.load(save_checkpoint(hf, tmp_path / name, id_tokenizer(VOCAB)))


def test_listed_chance_levels_are_what_uniform_attention_scores(tmp_path):
    model = _uniform_model(tmp_path, unembed=True)
    scores = ihprobe.scan(model, [*UNIFORM, "logit_attribution"], seed=1)
    assert scores.settings["n"] == DEFAULT_PROBE["repeated"]  # the default probe ran
    assert set(UNIFORM) >= {"prefix_matching", "forward_induction_fixed", "anti_induction"}
    for name in UNIFORM:
        measured = float(scores.head[name].mean())
        # varied lengths are drawn per row: the listed level is their expectation
        tolerance = 0.1 if name in ("forward_induction_varied", "backward_duplicate") else 1e-4
        tolerance = 0.1 if name == "backward_previous_token" else tolerance
        assert measured == pytest.approx(chance_level(name), rel=tolerance), name
    la = float(scores.head["logit_attribution"].mean())
    assert la == pytest.approx(chance_level("logit_attribution"), rel=0.1)


def test_listed_losses_are_what_flat_logits_score(tmp_path):
    model = _uniform_model(tmp_path, unembed=False)
    scores = ihprobe.scan(model, ["induction_loss", "backward_copy_loss"], batch=10)
    for name in ("induction_loss", "backward_copy_loss"):
        assert scores.model[name] == pytest.approx(chance_level(name, VOCAB), rel=1e-5)


def test_the_command_lists_every_metric_and_scan_help_points_to_it(capsys):
    assert main(["metrics", "--vocab", str(VOCAB)]) == 0
    out = capsys.readouterr().out
    for name in METRIC_TABLE:
        assert f"\n{name} (" in "\n" + out
    assert f"chance {chance_level('ar_accuracy', VOCAB):.4g};" in out
    assert main(["metrics", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown()
    assert main(["scan", "--help"]) == 0
    assert "`ihprobe metrics`" in " ".join(capsys.readouterr().out.split())


def test_fv_chance_is_what_heads_that_carry_no_task_score(tmp_path):
    """fv's chance level, 0: a head whose last-token output does not depend on the prompt adds
    nothing when its clean mean is patched in. One layer of uniform attention over a position-free
    (rotary) residual gives each head the mean of its values over the prompt's tokens: the same
    on every prompt of a task whose prompts all hold the same tokens (one label for every x), so
    every effect is 0 up to rounding; on the planted task (the query's label left out) it is
    within 1e-3 of 0 (5e-5 measured), where the answer's probability is about 1/V. No task is done
    above chance, so scan reports no fv score at all, only the note."""
    hf = tiny_hf_model("llama", vocab_size=len(WORDS), layers=1)
    with torch.no_grad():
        hf.model.layers[0].self_attn.q_proj.weight.zero_()
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "uniform-words", word_tokenizer()))
    same = Task("one_label", tuple((x, "y0") for x, _ in PAIRS))
    tasks = [same, Task("planted", PAIRS)]
    found = ihprobe.fv_scores(model, tasks, shots=7, prompts=8)
    chance = METRIC_TABLE["fv"].chance(len(WORDS), DEFAULT_PROBE["repeated"])
    assert chance == chance_level("fv") == 0.0
    assert torch.allclose(found.task_scores("one_label"), torch.tensor(chance).double(), atol=1e-7)
    assert found.task_scores("planted").abs().max() < 1e-3
    assert found.used == []
    scores = ihprobe.scan(model, ["fv"], tasks=tasks)
    assert "fv" not in scores.head and scores.settings["notes"][0].startswith("fv skipped: no task")
