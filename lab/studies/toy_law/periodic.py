"""The toy law's data: random tokens that repeat with a period drawn per row from 8..32.

>>> Periodic(batch_size=2, context=40, seed=0).sample(0).tokens.shape
torch.Size([2, 40])
"""

from __future__ import annotations

import torch

from ihprobe.data import Batch, Producer


class Periodic(Producer):
    """Random tokens that repeat with a period drawn per row from 8..32:
    variable periods make induction, not fixed-offset attention, the way to predict them."""

    name = "periodic"

    def __init__(self, *, batch_size, context, seed=0, total_steps=1, vocab_size=128):
        super().__init__(batch_size=batch_size, context=context, seed=seed, total_steps=total_steps)
        self.vocab_size, self.special = vocab_size, {}

    def sample(self, step):
        g = self.generator(step)
        periods = torch.randint(8, 33, (self.batch_size,), generator=g)
        base = torch.randint(self.vocab_size, (self.batch_size, 32), generator=g)
        pos = torch.arange(self.context)
        return Batch(tokens=base.gather(1, pos[None] % periods[:, None]))

    def config(self):
        return {**self.base_config(), "vocab_size": self.vocab_size}

    def tokenizer(self):
        return None
