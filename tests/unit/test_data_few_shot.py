"""The few-shot producer: a set share of rows are function prompts in fv_scores' own format."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from ihprobe.causal.tasks import Task, builtin_tasks, make_prompts
from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer
from ihprobe.data.few_shot import episode_text

TASKS = builtin_tasks(size=12)
PAIRS = [(t.name, x, y) for t in TASKS for x, y in t.pairs]
BLOCK = re.compile(r"Q: (.*?)\nA: (.*?)\n\n", re.S)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """A small text corpus (its BPE trains in a second): the words the tasks use, and prose."""
    words = " ".join(x for _, x, _ in PAIRS)
    text = ("The quick brown fox jumps over the lazy dog. " * 40 + words + "\n") * 20
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(text)
    return str(path)


def producer(corpus, **options):
    settings = {"batch_size": 8, "context": 64, "seed": 0, "text": corpus, "vocab_size": 300}
    return make_producer("few-shot", **{**settings, "pairs": PAIRS, **options})


def test_the_share_of_prompt_rows_is_the_set_share(corpus):
    whole = producer(corpus, share=0.25)
    assert all(len(whole.prompt_rows(step)) == 2 for step in range(50))
    assert whole.sample(3).info == {"prompt_share": 0.25}
    part = producer(corpus, share=0.3)  # 2.4 rows: 2, or 3 with chance 0.4
    counts = [len(part.prompt_rows(step)) for step in range(400)]
    assert set(counts) == {2, 3}
    # the mean count's standard error is sqrt(0.24 / 400) = 0.024: 5 of them either side
    assert abs(np.mean(counts) - 2.4) < 0.12
    assert producer(corpus, share=0.0).prompt_rows(0) == []
    assert len(producer(corpus, share=1.0).prompt_rows(0)) == 8


def test_prompt_rows_hold_episodes_and_the_rest_are_corpus_windows(corpus):
    p = producer(corpus, share=0.5, shots=3, context=512)
    tok, eos, stream = p.tokenizer(), p.corpus.eos, np.asarray(p.corpus.tokens, dtype=np.int64)
    batch, rows = p.sample(1).tokens, p.prompt_rows(1)
    by_task = {t.name: set(t.pairs) for t in TASKS}
    episodes = 0
    for row in rows:
        ids = batch[row].tolist()
        assert tok.decode(ids[:8]).startswith("Q: ")  # as a probe starts
        cut = [i for i, t in enumerate(ids) if t == eos]
        starts = [0, *[c + 1 for c in cut]]
        for a, b in zip(starts, cut, strict=False):  # whole episodes: those closed by EOS
            text = tok.decode(ids[a:b])
            pairs = BLOCK.findall(text)
            assert episode_text(pairs) == text and len(pairs) == 4  # shots + 1
            assert any(set(pairs) <= shown for shown in by_task.values())  # one task's pairs
            assert len(set(pairs)) == 4  # without replacement
            episodes += 1
    assert episodes >= len(rows)
    for row in set(range(8)) - set(rows):
        window = batch[row].numpy()
        hits = np.flatnonzero(stream[: len(stream) - len(window) + 1] == window[0])
        assert any((stream[h : h + len(window)] == window).all() for h in hits)


def test_prompts_are_tokenized_as_fv_scores_tokenizes_its_probes(corpus):
    """A clean fv_scores prompt is a prefix of the producer's episode of the same pairs, and the
    episode's next token is the probe's answer token."""
    p = producer(corpus)
    tok = p.tokenizer()
    for task in TASKS:
        probes = make_prompts(task, tok, shots=4, prompts=6, seed=1)
        for row, valid, answer in zip(probes.tokens, probes.valid, probes.answer, strict=True):
            ids = row[valid].tolist()
            text = tok.decode(ids)
            shown = BLOCK.findall(text)  # the demos; the query's block has no label yet
            query = re.search(r"Q: ([^\n]*)\nA: ?$", text)
            assert len(shown) == 4 and query is not None
            pairs = dict(task.pairs)
            episode = tok(episode_text([*shown, (query[1], pairs[query[1]])])).input_ids
            assert episode[: len(ids)] == ids
            assert episode[len(ids)] == int(answer)


def test_the_same_seed_gives_the_same_batches_in_any_order(corpus):
    a, b = producer(corpus, share=0.5), producer(corpus, share=0.5)
    late, early = a.sample(7).tokens, a.sample(2).tokens
    assert torch.equal(b.sample(2).tokens, early) and torch.equal(b.sample(7).tokens, late)
    other = producer(corpus, share=0.5, seed=1)
    assert not torch.equal(other.sample(2).tokens, early)
    rebuilt = make_producer("few-shot", **json.loads(json.dumps(a.config())))
    assert torch.equal(rebuilt.sample(7).tokens, late)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"share": 1.5}, "share=1.5 is not a probability"),
        ({"pairs": []}, "needs pairs=[[task, x, y]"),
        ({"pairs": [("t", "a", "b")]}, "task(s) t have one pair"),
        ({"pairs": [("t", "a", "")]}, "each must be [task, x, y]"),
        ({"shots": 0}, "shots=0"),
    ],
)
def test_bad_options_are_one_line(corpus, options, says):
    with pytest.raises(IhprobeError) as err:
        producer(corpus, **options)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_task_smaller_than_an_episode_gives_all_its_pairs(corpus):
    small = Task("pair", (("up", "down"), ("in", "out")))
    p = producer(corpus, pairs=[(small.name, x, y) for x, y in small.pairs], share=1.0, shots=5)
    text = p.tokenizer().decode(p.sample(0).tokens[0])
    assert sorted(BLOCK.findall(text)[:2]) == sorted(small.pairs)
