"""Semi-natural data ([A] experiment 2): a bigram model of real text with two knobs.

Rows of length C follow a smoothed, row-normalised token-to-token transition matrix estimated
from a natural token stream (the embedded corpus by default), with the repetition p_a and
reliability p_b of :mod:`ihprobe.data.repetition` on top: the first half of a row never re-uses a
token, the second half repeats and copies with those probabilities. The realised repetition and
reliability are reported in ``Batch.info``.

>>> p = SemiNaturalProducer(batch_size=64, context=64, repetition=0.9, reliability=0.9,
...                         vocab_size=300)
>>> round(p.sample(0).info["reliability"], 1)
0.9
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int

from ihprobe.core.errors import IhprobeError
from ihprobe.data.base import Batch, Producer, check_probability
from ihprobe.data.repetition import RepetitionLayer, check_room
from ihprobe.data.sampling import BigramProcess
from ihprobe.data.text import TextOptions

MAX_VOCAB = 8192  # the bigram matrix is dense: 8192^2 float32 = 256 MB


def bigram_matrix(
    stream: Int[torch.Tensor, "n"], vocab_size: int, smoothing: float = 0.1
) -> Float[torch.Tensor, "vocab vocab"]:  # noqa: F821 - jaxtyping dims
    """Row-normalised bigram counts of a token stream, each count plus ``smoothing``.

    >>> bigram_matrix(torch.tensor([0, 1, 0, 1, 0]), 2, smoothing=0.0).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    s = stream.long()
    counts = torch.bincount(s[:-1] * vocab_size + s[1:], minlength=vocab_size**2).double()
    counts = counts.view(vocab_size, vocab_size) + smoothing
    return (counts / counts.sum(1, keepdim=True)).float()


@dataclass(frozen=True)
class SemiNaturalOptions(TextOptions):
    """Semi-natural options: the repetition knobs, and the corpus the bigrams come from.

    Args:
        repetition: p_a, P(A,B..A).
        reliability: p_b, P(B | A,B..A).
        smoothing: added to every bigram count before row normalisation.
        text, dataset, tokenizer, vocab_size, docstrings, ...: the corpus the bigrams are
            estimated from, as for the natural producer (:class:`TextOptions`).
    """

    repetition: float = 0.9
    reliability: float = 0.9
    smoothing: float = 0.1

    def check(self) -> None:
        check_probability("repetition", self.repetition)
        check_probability("reliability", self.reliability)
        if self.smoothing <= 0:
            raise IhprobeError(f"smoothing={self.smoothing} must be > 0 so every row has mass.")


class SemiNaturalProducer(Producer):
    """Semi-natural rows over a bigram model of a natural corpus (default: the embedded one).

    Options: :class:`SemiNaturalOptions`.

    Example:
        >>> SemiNaturalProducer(batch_size=2, context=16).sample(0).tokens.shape
        torch.Size([2, 16])
    """

    name = "semi-natural"
    Options = SemiNaturalOptions
    options: SemiNaturalOptions
    measure_from = 0.5  # repetition/reliability are measured on the second half of each row

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        o = self.options
        self.corpus = o.load()
        if self.corpus.vocab_size > MAX_VOCAB:
            raise IhprobeError(
                f"the tokenizer has {self.corpus.vocab_size} ids; the dense bigram matrix of "
                f"semi-natural data supports at most {MAX_VOCAB}: use a local BPE (vocab_size)."
            )
        self.vocab_size = self.corpus.vocab_size
        self.special = {"eos": self.corpus.eos, "sep": self.corpus.sep}
        stream = torch.from_numpy(self.corpus.tokens.astype("int64"))
        banned = list(self.special.values())  # never emitted: EOS, SEP
        check_room(self.vocab_size - len(banned), self.context)
        self.transition = bigram_matrix(stream, self.vocab_size, o.smoothing)
        self.transition[:, banned] = 0.0
        self.unigram = torch.bincount(stream, minlength=self.vocab_size).float() + o.smoothing
        self.unigram[banned] = 0.0
        self.layer = RepetitionLayer(
            self, BigramProcess(self.transition), self.unigram, o.repetition, o.reliability
        )

    def sample(self, step: int) -> Batch:
        return self.layer.sample(step)

    def tokenizer(self):
        return self.corpus.tokenizer
