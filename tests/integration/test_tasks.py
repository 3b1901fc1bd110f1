"""Function-style ICL tasks: the pairs are right, prompts are well formed, HITS@k is exact."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import ihprobe
from ihprobe.causal.evaluation import evaluate_groups
from ihprobe.causal.masks import keep_mask
from ihprobe.causal.tasks import (
    SEQUENCES,
    builtin_tasks,
    hits_per_row,
    make_prompts,
    read_task,
    task_probes,
)
from ihprobe.core.errors import IhprobeError
from tests.helpers import save_checkpoint, tiny_hf_model


def test_builtin_pairs_follow_their_rule():
    tasks = {t.name: t.pairs for t in builtin_tasks(seed=3)}
    assert all(len(p) == 60 for p in tasks.values())
    for x, y in tasks["copy_word"]:
        assert x == y and x.isalpha() and x.islower()
    assert all(y == x.capitalize() for x, y in tasks["capitalize"])
    assert all(y == x[0] for x, y in tasks["first_letter"])
    assert all(y == x[-1] for x, y in tasks["last_letter"])
    assert all(y == x.split(", ")[0] for x, y in tasks["first_item"])
    assert all(y == x.split(", ")[-1] for x, y in tasks["last_item"])
    assert all(3 <= len(x.split(", ")) <= 5 for x, _ in tasks["first_item"])
    for x, y in tasks["next_item"]:
        seq = next(list(s) for s in SEQUENCES if x in s)
        assert seq[seq.index(x) + 1] == y
    assert builtin_tasks(seed=3) == builtin_tasks(seed=3) != builtin_tasks(seed=4)


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".tsv", ".csv"])
def test_user_task_files(tmp_path, suffix):
    pairs = [("hot", "cold"), ("up", "down"), ("big", "small")]
    path = tmp_path / f"antonyms{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"name": "opposites", "pairs": pairs}))
    elif suffix == ".jsonl":
        path.write_text("\n".join(json.dumps({"x": x, "y": y}) for x, y in pairs))
    else:
        sep = "\t" if suffix == ".tsv" else ","
        path.write_text("\n".join(f"{x}{sep}{y}" for x, y in pairs) + "\n")
    task = read_task(path)
    assert task.pairs == tuple(pairs)
    assert task.name == ("opposites" if suffix == ".json" else "antonyms")


def test_bad_task_files_say_what_to_write(tmp_path):
    with pytest.raises(IhprobeError, match="does not exist"):
        read_task(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([["only-x"]]))
    with pytest.raises(IhprobeError, match="not a list of \\(x, y\\) pairs"):
        read_task(bad)
    one = tmp_path / "one.tsv"
    one.write_text("a\tb\n")
    with pytest.raises(IhprobeError, match="at least 2"):
        read_task(one)


def test_prompts_are_few_shot_and_answers_are_first_word_tokens(tokenizer):
    task = builtin_tasks()[3]  # capitalize
    p = make_prompts(task, tokenizer, shots=3, prompts=24)
    spaces = 0
    for b in range(24):
        x, y = task.pairs[b]
        answer = tokenizer(" " + y).input_ids
        text = tokenizer.decode(p.tokens[b, : p.last[b] + 1])
        assert text.startswith("Q: ") and f"Q: {x}\nA: {y}\n" not in text  # query not a demo
        assert text.count("Q: ") == 4
        # the answer's scored token is its first that is not a bare space; a space before it
        # is part of the prompt
        if tokenizer.decode(answer[:1]).strip():
            assert text.endswith(f"Q: {x}\nA:") and p.answer[b] == answer[0]
        else:
            spaces += 1
            assert text.endswith(f"Q: {x}\nA: ") and p.answer[b] == answer[1]
        scored = (text + tokenizer.decode([p.answer[b]])).rsplit("\nA:", 1)[1]
        assert (" " + y).startswith(scored) and scored.strip()  # part of y, not a bare space
        assert p.valid[b].sum() == p.last[b] + 1 and not p.valid[b, p.last[b] + 1 :].any()
    assert 0 < spaces < 24  # this 512-id BPE spells some capitals' space apart, not all
    short = make_prompts(task, tokenizer, shots=5, prompts=3, max_length=30)
    assert int(short.valid.sum(1).max()) <= 30  # fewer shots when the context is short
    with pytest.raises(IhprobeError, match="no examples needs"):
        make_prompts(task, tokenizer, max_length=3)


def test_hits_at_k_against_hand_ranked_logits():
    logits = torch.zeros(3, 4, 5)
    logits[0, 1] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])  # answer 0: rank 0
    logits[1, 3] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])  # answer 2: rank 2
    logits[2, 2] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])  # answer 4: rank 4
    hits = hits_per_row(logits, torch.tensor([1, 3, 2]), torch.tensor([0, 2, 4]))
    assert hits["hits@1"].tolist() == [1.0, 0.0, 0.0]
    assert hits["hits@3"].tolist() == [1.0, 1.0, 0.0]


@pytest.mark.slow
def test_ablate_reports_hits_per_task_and_averaged(tmp_path, tokenizer):
    directory = save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "m", tokenizer)
    model = ihprobe.load(directory)
    user = tmp_path / "pairs.tsv"
    user.write_text("one\ttwo\ntwo\tthree\nthree\tfour\n")
    tasks = [builtin_tasks()[0], user]
    result = ihprobe.ablate(
        model, random=2, metrics=["hits@1", "hits@3"], tasks=tasks, scores=torch.rand(2, 4)
    )
    assert set(result.values) == {
        "hits@1",
        "hits@3",
        "hits@1:copy_word",
        "hits@3:copy_word",
        "hits@1:pairs",
        "hits@3:pairs",
    }
    for k in ("hits@1", "hits@3"):
        mean = (result.values[f"{k}:copy_word"] + result.values[f"{k}:pairs"]) / 2
        assert torch.allclose(result.values[k], mean)
    assert (result.values["hits@1"] <= result.values["hits@3"]).all()
    prompts = make_prompts(tasks[0], tokenizer, max_length=model.cfg.n_ctx, seed=0)
    with torch.no_grad():  # the full-logit definition on the clean model
        clean = hits_per_row(model(prompts.tokens), prompts.last, prompts.answer)
    assert result.values["hits@3:copy_word"][0] == pytest.approx(float(clean["hits@3"].mean()))
    probe = task_probes(model, tasks[:1])[0]  # only each prompt's last position is unembedded
    seen = {}

    def spy_score(logits, rows):
        seen["x"] = logits
        return {}

    spy = dataclasses.replace(probe, score=spy_score)
    evaluate_groups(model, spy, keep_mask(model, [])[None], None)
    with torch.no_grad():
        full = model(prompts.tokens)[torch.arange(len(prompts.last)), prompts.last]
    assert seen["x"].shape == (len(prompts.last), 1, 512)
    assert torch.allclose(seen["x"][:, 0], full, atol=1e-5)
    with pytest.raises(IhprobeError, match="tasks is empty"):
        ihprobe.ablate(model, metrics=["hits@1"], tasks=[], scores=torch.rand(2, 4))
