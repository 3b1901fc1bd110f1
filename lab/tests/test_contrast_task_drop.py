"""[B]'s quantity in the contrast (issue 60): the relative drop of ICL task accuracy under top-2%
ablation, and the task floor on the reference model. The floor rule is proven on the reference
model's own prompts with planted hits (a task answered every time is above floor at p =
chance^24, the rest at floor); the committed floor CSV is the reference model's measurement;
[B]'s top 2% per layer is counted as ``ablate`` counts it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import ihprobe
from ihprobe.causal import fv
from ihprobe.causal.fv import chance_accuracy
from ihprobe.causal.head_sets import heads_per_layer
from ihprobe.causal.tasks import builtin_tasks, make_prompts
from lab.studies.contrast import heads, task_drop
from lab.studies.contrast import run as contrast


@pytest.fixture(scope="module")
def reference():
    return ihprobe.load(task_drop.REFERENCE)


def planted(model, monkeypatch, right: str) -> pd.DataFrame:
    """The floor table with the clean pass's hits replaced: task ``right`` answered on every
    prompt, every other task on none."""
    real = fv.clean_pass

    def clean_pass(model_, prompts):
        means, probability, hits = real(model_, prompts)
        return means, probability, torch.full_like(hits, float(prompts.task == right))

    monkeypatch.setattr(fv, "clean_pass", clean_pass)
    return task_drop.measure_floor(model)


@pytest.mark.slow  # one fv_scores pass over 13 tasks: about 5-15 s
def test_a_task_answered_every_time_is_above_floor_and_the_rest_are_not(reference, monkeypatch):
    table = planted(reference, monkeypatch, "next_item").set_index("task")
    assert table.above_floor.to_dict() == {t: t == "next_item" for t in table.index}
    row = table.loc["next_item"]
    task = next(t for t in builtin_tasks() if t.name == "next_item")
    prompts = make_prompts(task, reference.tokenizer, max_length=reference.cfg.n_ctx)
    assert row.chance == chance_accuracy(prompts.answer) < 1
    assert math.isclose(row.p_value, row.chance**24)  # 24 of 24 right under chance
    sentence = task_drop.floor_sentence(table.reset_index())
    assert sentence.startswith("Above floor on reference/natural-docs: 1 of ")
    assert "(next_item)" in sentence


@pytest.mark.slow  # one fv_scores pass over 13 tasks: about 5-15 s
def test_with_no_task_above_chance_the_file_says_none_is_and_names_each_baseline(
    reference, monkeypatch
):
    table = planted(reference, monkeypatch, "no such task")
    assert not table.above_floor.any() and np.allclose(table.p_value, 1.0)
    sentence = task_drop.floor_sentence(table)
    assert sentence.startswith("No task is above floor")
    assert all(f"{name} 0 (chance " in sentence for name in table.task)


@pytest.mark.slow  # the same pass, unplanted
def test_the_committed_floor_csv_is_the_reference_model_s(reference):
    committed = pd.read_csv(task_drop.FLOOR_CSV)
    fresh = task_drop.measure_floor(reference)
    assert committed.task.tolist() == fresh.task.tolist()
    assert np.allclose(committed.chance, fresh.chance)  # from the tokenizer alone
    assert (abs(committed["hits@1"] - fresh["hits@1"]) <= 1 / 24 + 1e-9).all()  # a tie may flip
    assert committed.above_floor.tolist() == fresh.above_floor.tolist()


def test_the_relative_drop_is_per_task_and_over_the_tasks():
    rows = [("hits@1", 0.25, -0.1), ("hits@3", 0.5, 0.0), ("icl_score", 1.0, 0.0)]
    rows += [("hits@1:copy_word", 0.5, -0.2), ("hits@1:capitalize", 0.0, 0.0)]
    out = task_drop.columns(pd.DataFrame(rows, columns=["metric", "clean", "change"]))
    assert out["hits@1"] == 0.25 and out["per-layer:hits@1_change"] == -0.1
    assert math.isclose(out["per-layer:hits@1_drop:copy_word"], 0.4)
    assert np.isnan(out["per-layer:hits@1_drop:capitalize"])  # no drop from a clean 0
    assert math.isclose(out[task_drop.DROP], 0.4)  # of the mean HITS@1: 0.1 of 0.25


@pytest.mark.parametrize("n_heads", [1, 4, 8, 12, 50, 51, 100])
def test_the_top_share_line_counts_heads_as_ablate_does(n_heads):
    k = heads_per_layer(n_heads, 0.02)
    assert f"is {k} of {n_heads} heads in each of the 3 layers here: {3 * k} of" in (
        heads.top_share(3, n_heads)
    )


def test_the_results_file_says_the_committed_rows_lack_it_until_a_row_has_it():
    frame = pd.DataFrame({"arm": ["natural"], "seed": [0], "status": ["done"]})
    text = "\n".join(task_drop.section(frame, ["natural"]))
    assert "cannot be measured again" in text
    text = "\n".join(task_drop.section(frame.assign(**{task_drop.DROP: 0.2}), ["natural"]))
    assert "cannot be measured again" not in text and "| natural | 0.2 (t, 1 seed" in text


def test_task_floor_asks_for_the_docs_recipe(capsys):
    with pytest.raises(SystemExit) as exit_:
        contrast.options(["--task-floor"])
    assert exit_.value.code == 2
    assert "add --recipe docs" in capsys.readouterr().err
