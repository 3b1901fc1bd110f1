"""The i.i.d. control: every token drawn independently from one marginal (no IHs can form).

>>> p = IIDProducer(batch_size=2, context=8, vocab_size=16, marginal="zipf")
>>> p.sample(0).tokens.shape
torch.Size([2, 8])
"""

from __future__ import annotations

from typing import Any

import torch

from ihprobe.core.standin import id_tokenizer
from ihprobe.data.base import Batch, Producer
from ihprobe.data.marginals import MarginalOptions


class IIDProducer(Producer):
    """Tokens i.i.d. from a marginal; options: :class:`~ihprobe.data.marginals.MarginalOptions`
    ("uniform", "gaussian", "zipf" or explicit weights; no special tokens are reserved).

    Example:
        >>> IIDProducer(batch_size=2, context=8, vocab_size=16).sample(0).tokens.shape
        torch.Size([2, 8])
    """

    name = "iid"
    Options = MarginalOptions
    options: MarginalOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        self.vocab_size = self.options.vocab_size
        self.special = {}
        self.probs = self.options.probs()

    def sample(self, step: int) -> Batch:
        g = self.generator(step)
        shape = (self.batch_size, self.context)
        if self.options.marginal == "uniform":
            tokens = torch.randint(self.vocab_size, shape, generator=g)
        else:
            flat = torch.multinomial(self.probs, shape[0] * shape[1], replacement=True, generator=g)
            tokens = flat.view(shape)
        return Batch(tokens=tokens)

    def tokenizer(self):
        return id_tokenizer(self.vocab_size)
