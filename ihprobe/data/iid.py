"""The i.i.d. control: every token drawn independently from one marginal (no IHs can form).

>>> p = IIDProducer(batch_size=2, context=8, vocab_size=16, marginal="zipf")
>>> p.sample(0).tokens.shape
torch.Size([2, 8])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ihprobe.data.base import Batch, Producer
from ihprobe.data.marginals import marginal as make_marginal
from ihprobe.data.tokenizer import id_tokenizer


class IIDProducer(Producer):
    """Tokens i.i.d. from a marginal: "uniform", "gaussian", "zipf" or explicit weights.

    Args:
        vocab_size: number of token ids (no special tokens are reserved).
        marginal: the shape of the token distribution.
        zipf_exponent: exponent of the "zipf" shape.
    """

    name = "iid"

    def __init__(
        self,
        *,
        batch_size: int,
        context: int,
        seed: int = 0,
        total_steps: int = 1,
        vocab_size: int = 128,
        marginal: str | Sequence[float] = "uniform",
        zipf_exponent: float = 1.0,
    ):
        super().__init__(batch_size=batch_size, context=context, seed=seed, total_steps=total_steps)
        self.vocab_size = int(vocab_size)
        self.special = {}
        self.marginal = marginal if isinstance(marginal, str) else [float(w) for w in marginal]
        self.zipf_exponent = float(zipf_exponent)
        self.probs = make_marginal(self.marginal, self.vocab_size, zipf_exponent=zipf_exponent)

    def sample(self, step: int) -> Batch:
        g = self.generator(step)
        shape = (self.batch_size, self.context)
        if self.marginal == "uniform":
            tokens = torch.randint(self.vocab_size, shape, generator=g)
        else:
            flat = torch.multinomial(self.probs, shape[0] * shape[1], replacement=True, generator=g)
            tokens = flat.view(shape)
        return Batch(tokens=tokens)

    def config(self) -> dict:
        return {
            **self.base_config(),
            "vocab_size": self.vocab_size,
            "marginal": self.marginal,
            "zipf_exponent": self.zipf_exponent,
        }

    def tokenizer(self):
        return id_tokenizer(self.vocab_size)
