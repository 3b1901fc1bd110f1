"""The word tasks of FV scores on the project's natural-text reference checkpoint: each builds
10-shot prompts that fit its context and has answers whose first tokens are not all one; the clean
accuracy of each is printed (reported, not asserted: a 2-layer model of software docs need not
do any of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ihprobe
from ihprobe.causal.fv import chance_accuracy, clean_pass
from ihprobe.causal.tasks import make_prompts
from ihprobe.causal.word_tasks import word_tasks

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "natural-docs"


@pytest.mark.slow  # six tasks x 25 prompts of 10 shots: about 5 s
def test_each_word_task_runs_on_the_reference_checkpoint():
    model = ihprobe.load(REFERENCE)
    rows = []
    for task in word_tasks():
        prompts = make_prompts(task, model.tokenizer, shots=10, prompts=25, max_length=256)
        assert int(prompts.valid.sum(1).max()) <= model.cfg.n_ctx
        chance = chance_accuracy(prompts.answer)
        assert chance < 1.0, task.name  # the answers do not all share one first token
        _, probability, hits = clean_pass(model, prompts)
        assert 0.0 <= float(hits.mean()) <= 1.0
        rows.append(
            f"{task.name}: {hits.mean():.2f} (chance {chance:.2f}, P {probability.mean():.3f})"
        )
    print("clean HITS@1 on reference/natural-docs:", "; ".join(rows))
