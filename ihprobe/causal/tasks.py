"""Function-style in-context tasks (Todd et al. 2024, used by [B]) scored by HITS@1 and HITS@3.

A task is a list of ``(x, y)`` pairs. A prompt shows ``shots`` solved pairs and asks for one more:
``"Q: x\\nA: y\\n\\n" * shots + "Q: x\\nA:"``; the model is right when the first token of
``" y"`` is among its top 1 (HITS@1) or top 3 (HITS@3) next-token predictions. A small
vocabulary may spell the space as a token of its own (``" Monday"`` -> ``" "``, ``"Monday"``):
then the space is given and the first token that is not whitespace alone is scored, since a
bare space is the same for every answer. With a large vocabulary (``" Paris"`` one token) that
is the first token, as in Todd et al.

The built-in tasks come from data ihprobe owns or can spell with any text tokenizer: words from
the embedded corpus (``ihprobe.data.corpus``), letters, digits, weekdays and months. A user task
is a file of pairs: JSON (``[[x, y], ...]`` or ``{"name": ..., "pairs": [...]}``), JSON lines,
or two tab/comma-separated columns.

>>> [t.name for t in builtin_tasks()]
['copy_word', 'first_item', 'last_item', 'capitalize', 'first_letter', 'last_letter', 'next_item']
>>> builtin_tasks()[3].pairs[0][1] == builtin_tasks()[3].pairs[0][0].capitalize()
True
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int

from ihprobe.causal.masks import derangement
from ihprobe.core.errors import IhprobeError
from ihprobe.data.corpus import default_documents
from ihprobe.probes.engine import Probe, reads_text

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

SHOTS = 5  # solved examples per prompt
PROMPTS = 24  # prompts per task
SIZE = 60  # pairs per built-in task
HITS = (1, 3)  # HITS@k reported

SEQUENCES = (
    "abcdefghijklmnopqrstuvwxyz",
    "0123456789",
    ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ),
)


@dataclass(frozen=True)
class Task:
    """A named list of ``(x, y)`` string pairs."""

    name: str
    pairs: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=1)
def corpus_words(count: int = 200) -> tuple[str, ...]:
    """The ``count`` most frequent lowercase words (3-9 letters) of ihprobe's embedded corpus."""
    counts = Counter(re.findall(r"\b[a-z]{3,9}\b", " ".join(default_documents())))
    return tuple(sorted(counts, key=lambda w: (-counts[w], w))[:count])


def builtin_tasks(*, seed: int = 0, size: int = SIZE) -> list[Task]:
    """The seven built-in tasks, ``size`` pairs each, drawn with ``seed``.

    Example:
        >>> dict(builtin_tasks(size=2)[1].pairs)                        # doctest: +SKIP
        {'which, module, name': 'which', ...}
    """
    rng = random.Random(seed)
    words = corpus_words()

    singles = rng.sample(words, min(size, len(words)))
    lists = [rng.sample(words, rng.choice((3, 4, 5))) for _ in range(size)]
    steps = [(seq, rng.randrange(len(seq) - 1)) for seq in rng.choices(SEQUENCES, k=size)]
    made = {
        "copy_word": [(w, w) for w in singles],
        "first_item": [(", ".join(w), w[0]) for w in lists],
        "last_item": [(", ".join(w), w[-1]) for w in lists],
        "capitalize": [(w, w.capitalize()) for w in singles],
        "first_letter": [(w, w[0]) for w in singles],
        "last_letter": [(w, w[-1]) for w in singles],
        "next_item": [(seq[i], seq[i + 1]) for seq, i in steps],
    }
    return [Task(name, tuple(pairs)) for name, pairs in made.items()]


def read_task(path: str | Path, name: str | None = None) -> Task:
    """A user task from a file of ``(x, y)`` pairs (JSON, JSON lines, TSV or CSV).

    Example:
        >>> read_task("antonyms.tsv").pairs[:1]                          # doctest: +SKIP
        (('hot', 'cold'),)
    """
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"
        raise IhprobeError(f"task file {path} {what}; pass a file of (x, y) pairs.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise IhprobeError(
            f"task file {path} is not UTF-8 text (byte {err.start}); save it as UTF-8."
        ) from None
    except OSError as err:
        raise IhprobeError(f"cannot read task file {path}: {err.strerror or err}.") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
            name = name or (data.get("name") if isinstance(data, dict) else None)
            rows = data["pairs"] if isinstance(data, dict) else data
        elif path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            rows = [(r["x"], r["y"]) if isinstance(r, dict) else r for r in rows]
        else:
            delimiter = "\t" if "\t" in text else ","
            rows = [r for r in csv.reader(text.splitlines(), delimiter=delimiter) if r]
        pairs = tuple((str(x), str(y)) for x, y in rows)
    except (ValueError, KeyError, TypeError) as err:
        raise IhprobeError(
            f"{path} is not a list of (x, y) pairs ({err}); write JSON [[x, y], ...], JSON lines "
            'of {"x": ..., "y": ...}, or two tab- or comma-separated columns.'
        ) from err
    if len(pairs) < 2:
        raise IhprobeError(f"{path} holds {len(pairs)} pair(s); a few-shot task needs at least 2.")
    return Task(name or path.stem, pairs)


def read_tasks(tasks: Sequence[Task | str | Path] | Task | str | Path) -> list[Task]:
    """``tasks`` as :class:`Task` objects: each file read once (:func:`read_task`), each
    ``Task`` kept; one task or file alone is a list of one.

    Example:
        >>> [t.name for t in read_tasks(Task("copy", (("a", "a"), ("b", "b"))))]
        ['copy']
    """
    if isinstance(tasks, (str, Path, Task)):
        tasks = [tasks]
    return [t if isinstance(t, Task) else read_task(t) for t in tasks]


def task_digest(task: Task) -> str:
    """The sha256 of a task's name and pairs: what a cache keys a task by, so that an edited
    task file is a new task and a renamed path to the same pairs is not.

    Example:
        >>> task_digest(Task("t", (("a", "b"),))) == task_digest(Task("t", (("a", "c"),)))
        False
    """
    text = json.dumps([task.name, [list(pair) for pair in task.pairs]], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TaskPrompts:
    """Few-shot prompts of one task, right-padded into one batch."""

    task: str
    tokens: Int[torch.Tensor, "batch pos"]  # padded with the tokenizer's pad/EOS id
    valid: torch.Tensor  # [batch, pos] bool: real tokens
    last: Int[torch.Tensor, " batch"]  # position of each prompt's last token ("A:")
    answer: Int[torch.Tensor, " batch"]  # first token of " y" that is not whitespace alone


def make_prompts(
    task: Task,
    tokenizer,
    *,
    shots: int = SHOTS,
    prompts: int = PROMPTS,
    max_length: int = 1024,
    seed: int = 0,
    shuffled: bool = False,
) -> TaskPrompts:
    """``prompts`` few-shot prompts of ``task``; fewer shots when a prompt would not fit.

    ``shuffled`` gives Todd et al.'s corrupted prompts: the same examples' ``x`` and the same
    query as with ``shuffled=False``, the examples' ``y`` permuted among them so that no pair
    keeps its own (with two or more examples), so the prompt shows no mapping.

    Example:
        >>> p = make_prompts(builtin_tasks()[0], model.tokenizer, max_length=128)  # doctest: +SKIP
        >>> p.tokens.shape[0], int(p.valid.sum(1).max()) <= 128           # doctest: +SKIP
        (24, True)
    """
    rng = random.Random(f"{task.name}:{seed}")
    rows, answers = [], []
    for i in range(prompts):
        query = task.pairs[i % len(task.pairs)]
        others = [p for p in task.pairs if p != query] or list(task.pairs)
        demos = rng.sample(others, min(shots, len(others)))
        answer = tokenizer(" " + query[1], add_special_tokens=False).input_ids
        if not answer:
            raise IhprobeError(f"task {task.name}: the answer {query[1]!r} has no tokens.")
        given = first_word_token(answer, tokenizer)
        while True:
            shown = _shuffled(demos, f"{task.name}:{seed}:{i}") if shuffled else demos
            text = "".join(f"Q: {x}\nA: {y}\n\n" for x, y in shown) + f"Q: {query[0]}\nA:"
            ids = tokenizer(text, add_special_tokens=False).input_ids + answer[:given]
            if len(ids) <= max_length or not demos:
                break
            demos = demos[:-1]
        if len(ids) > max_length:
            raise IhprobeError(
                f"task {task.name}: a prompt with no examples needs {len(ids)} tokens but the "
                f"model's context holds {max_length}; use shorter pairs."
            )
        rows.append(ids)
        answers.append(answer[given])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    length = max(len(r) for r in rows)
    tokens = torch.full((len(rows), length), pad, dtype=torch.long, device="cpu")
    valid = torch.zeros(len(rows), length, dtype=torch.bool, device="cpu")
    for b, ids in enumerate(rows):
        tokens[b, : len(ids)] = torch.tensor(ids, device="cpu")
        valid[b, : len(ids)] = True
    return TaskPrompts(
        task.name,
        tokens,
        valid,
        valid.sum(1) - 1,
        torch.tensor(answers, dtype=torch.long, device="cpu"),
    )


def _shuffled(demos: list[tuple[str, str]], key: str) -> list[tuple[str, str]]:
    """``demos`` with their ``y`` permuted so that none keeps its own place (a derangement of
    the places, drawn by ``key``), where two or more demos allow one.

    >>> [y for _, y in _shuffled([("a", "1"), ("b", "2"), ("c", "3")], "k")] != ["1", "2", "3"]
    True
    """
    if len(demos) < 2:
        return list(demos)
    order = derangement(len(demos), seed=random.Random(key).randrange(2**31)).tolist()
    return [(x, demos[j][1]) for (x, _), j in zip(demos, order, strict=True)]


def first_word_token(answer: Sequence[int], tokenizer) -> int:
    """The index of the first token of ``answer`` that is not whitespace alone (0 when all are).

    Example:
        >>> first_word_token(tokenizer(" Monday").input_ids, tokenizer)  # doctest: +SKIP
        1
    """
    for i, token in enumerate(answer):
        if tokenizer.decode([token]).strip():
            return i
    return 0


def hits_per_row(
    logits: Float[torch.Tensor, "batch pos vocab"],
    last: Int[torch.Tensor, " batch"],
    answer: Int[torch.Tensor, " batch"],
    ks: Sequence[int] = HITS,
) -> dict[str, Float[torch.Tensor, " batch"]]:
    """``{"hits@k": [batch]}``: 1 where the answer's rank at position ``last`` is below k.

    Rank = number of logits strictly greater than the answer's (ties in its favour).

    Example:
        >>> logits = torch.tensor([[[0.0, 3.0, 2.0, 1.0]]])
        >>> hits_per_row(logits, torch.tensor([0]), torch.tensor([3]))
        {'hits@1': tensor([0.]), 'hits@3': tensor([1.])}
    """
    at = logits[
        torch.arange(len(last), device=logits.device), last.to(logits.device)
    ]  # [batch, vocab]
    target = at.gather(-1, answer.to(logits.device).unsqueeze(-1))
    rank = (at > target).sum(-1)
    return {f"hits@{k}": (rank < k).float() for k in ks}


def task_probes(
    model: TransformerLensModel,
    tasks: Sequence[Task | str | Path] | None = None,
    *,
    seed: int = 0,
) -> list[Probe]:
    """One :class:`~ihprobe.probes.engine.Probe` per task (default: the built-ins; paths are read).

    Example:
        >>> [p.name for p in task_probes(model)][:2]                     # doctest: +SKIP
        ['copy_word', 'first_item']
    """
    if not reads_text(getattr(model, "tokenizer", None)):
        raise IhprobeError(
            "function-style tasks need a tokenizer that reads text; this model has token ids "
            "only. Load it with tokenizer=... or leave hits@1/hits@3 out of metrics."
        )
    tasks = builtin_tasks(seed=seed) if tasks is None else list(tasks)
    if not tasks:
        raise IhprobeError("tasks is empty; pass task files or leave tasks=None for the built-ins.")
    probes = []
    for task in tasks:
        task = task if isinstance(task, Task) else read_task(task)
        p = make_prompts(task, model.tokenizer, max_length=model.cfg.n_ctx, seed=seed)
        device = model.cfg.device

        def score(logits, rows, p=p):  # logits at each prompt's last position only
            return hits_per_row(logits, torch.zeros_like(rows), p.answer[rows])

        last = p.last.unsqueeze(1).to(device)  # [prompts, 1]: unembed each prompt's last token
        probes.append(Probe(task.name, p.tokens.to(device), score, last, p.valid.to(device), True))
    return probes
