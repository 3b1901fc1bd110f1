"""Few-shot function prompts mixed into natural text: the rows function-vector heads learn from.

A set ``share`` of each batch's rows are few-shot prompts in Todd et al.'s format, the format
``ihprobe.fv_scores`` probes with: one task's solved pairs ``"Q: x\\nA: y\\n\\n"`` repeated,
``shots + 1`` pairs per episode (a probe shows ``shots`` and asks the last), each episode
closed by EOS and followed by another until the row is full. The other rows are windows of the
natural corpus, as the ``natural`` producer draws them. The pairs are passed in as
``(task, x, y)`` triples (the data layer does not know the tasks; the function-style tasks of
:mod:`ihprobe.causal` supply them), so a run's config records exactly what it trained on.

>>> pairs = [("copy", w, w) for w in ("cat", "dog", "sun", "map")]
>>> p = FewShotProducer(batch_size=4, context=32, vocab_size=300, pairs=pairs, share=0.5, shots=2)
>>> len(p.prompt_rows(0)), episode_text([("cat", "cat"), ("dog", "dog")])
(2, 'Q: cat\\nA: cat\\n\\nQ: dog\\nA: dog\\n\\n')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data.base import Batch, check_probability
from ihprobe.data.text import NaturalProducer, TextOptions

PROMPT_STREAM, EPISODE_STREAM = 1, 2  # generator streams: which rows; which tasks and pairs


def episode_text(pairs: Sequence[tuple[str, str]]) -> str:
    """Solved pairs in Todd et al.'s few-shot format, as ``fv_scores``' prompts show them.

    >>> episode_text([("hot", "cold")])
    'Q: hot\\nA: cold\\n\\n'
    """
    return "".join(f"Q: {x}\nA: {y}\n\n" for x, y in pairs)


@dataclass(frozen=True)
class FewShotOptions(TextOptions):
    """The natural corpus (:class:`TextOptions`), the pairs and how often prompts come.

    Args:
        pairs: ``(task, x, y)`` triples; a task needs at least two pairs.
        share: the expected share of rows that are prompts (``share * batch_size`` rows per
            batch: its whole part always, one more with the chance of its fraction).
        shots: solved pairs a probe shows; an episode holds ``shots + 1`` (fewer when a task
            has fewer pairs).
        text, vocab_size, tokenizer, ...: the natural corpus, as for the ``natural`` producer.
    """

    pairs: tuple[tuple[str, str, str], ...] = ()
    share: float = 0.25
    shots: int = 10

    def check(self) -> None:
        check_probability("share", self.share)
        if self.shots < 1:
            raise IhprobeError(f"shots={self.shots}: pass a whole number of 1 or more.")
        if not self.pairs:
            raise IhprobeError(
                "the few-shot producer needs pairs=[[task, x, y], ...], e.g. from the built-in "
                "tasks: [[t.name, x, y] for t in ihprobe.builtin_tasks() for x, y in t.pairs]."
            )
        for triple in self.pairs:
            if len(triple) != 3 or not all(s.strip() for s in triple):
                raise IhprobeError(f"pairs holds {triple!r}; each must be [task, x, y], non-empty.")
        counts = {}
        for task, _, _ in self.pairs:
            counts[task] = counts.get(task, 0) + 1
        few = sorted(t for t, n in counts.items() if n < 2)
        if few:
            raise IhprobeError(f"task(s) {', '.join(few)} have one pair; a prompt needs 2 or more.")


class FewShotProducer(NaturalProducer):
    """Natural-text windows, a ``share`` of rows replaced by few-shot function prompts.

    Options: :class:`FewShotOptions`. ``Batch.info["prompt_share"]`` is the batch's realised
    share; :meth:`prompt_rows` says which rows are prompts.

    Example:
        >>> pairs = [("copy", w, w) for w in ("cat", "dog", "sun")]
        >>> p = FewShotProducer(batch_size=2, context=16, vocab_size=300, pairs=pairs, share=1)
        >>> p.tokenizer().decode(p.sample(0).tokens[0]).startswith("Q: ")
        True
    """

    name = "few-shot"
    Options = FewShotOptions
    options: FewShotOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        tasks: dict[str, list[tuple[str, str]]] = {}
        for task, x, y in self.options.pairs:
            tasks.setdefault(task, []).append((x, y))
        self.tasks = tasks  # task -> its (x, y) pairs, in the order given

    def prompt_rows(self, step: int) -> list[int]:
        """The rows of batch ``step`` that are prompts (a pure function of seed and step)."""
        g = self.generator(step, PROMPT_STREAM)
        expected = self.options.share * self.batch_size
        count = math.floor(expected)
        if torch.rand(1, generator=g).item() < expected - count:
            count += 1
        return sorted(torch.randperm(self.batch_size, generator=g)[:count].tolist())

    def sample(self, step: int) -> Batch:
        tokens = super().sample(step).tokens
        rows = self.prompt_rows(step)
        g = self.generator(step, EPISODE_STREAM)
        for row in rows:
            tokens[row] = torch.from_numpy(self._prompt_row(g))
        return Batch(tokens=tokens, info={"prompt_share": len(rows) / self.batch_size})

    def episode(self, g: torch.Generator) -> tuple[str, list[tuple[str, str]]]:
        """One episode: a task drawn uniformly, ``shots + 1`` of its pairs without replacement."""
        names = list(self.tasks)
        task = names[int(torch.randint(len(names), (1,), generator=g))]
        pairs = self.tasks[task]
        order = torch.randperm(len(pairs), generator=g)[: self.options.shots + 1].tolist()
        return task, [pairs[i] for i in order]

    def _prompt_row(self, g: torch.Generator) -> np.ndarray:
        ids: list[int] = []
        while len(ids) < self.context:
            _, pairs = self.episode(g)
            text = episode_text(pairs)
            ids += self.corpus.tokenizer(text, add_special_tokens=False).input_ids
            ids.append(self.corpus.eos)
        return np.asarray(ids[: self.context], dtype=np.int64)
