"""Generate the rows of several consecutive steps in one vectorised call.

Producers whose rows are built position by position (a Python loop over positions, tensor ops
across rows) pay a fixed overhead per position. Generating the rows of ``ROWS_PER_BLOCK //
batch_size`` consecutive steps together shares that overhead; each step's rows still come from
that step's own generator, so a batch stays a pure function of (seed, step).

>>> import numpy as np, torch
>>> from ihprobe.data.iid import IIDProducer
>>> p = IIDProducer(batch_size=2, context=4)
>>> blocks = StepBlocks(p, lambda g: (torch.rand(2, 4, generator=g).numpy(),),
...                     lambda u: (torch.from_numpy(u), np.zeros((len(u), 1))))
>>> tokens, per_row = blocks.rows(5)
>>> tuple(tokens.shape)
(2, 4)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ihprobe.data.base import Producer

ROWS_PER_BLOCK = 512  # rows generated per call


class StepBlocks:
    """Rows of a producer's steps, generated a block of consecutive steps at a time.

    Args:
        producer: supplies ``batch_size`` and ``generator(step)``.
        draw: the random arrays one step needs, from that step's generator (each ``[batch, ...]``).
        generate: rows from the concatenated arrays of a block: ``(tokens [rows, pos], per_row
            [rows, k])``; row i may depend only on row i of the arrays.
    """

    def __init__(
        self,
        producer: Producer,
        draw: Callable[[torch.Generator], tuple[np.ndarray, ...]],
        generate: Callable[..., tuple[torch.Tensor, np.ndarray]],
    ):
        self.producer, self.draw, self.generate = producer, draw, generate
        self.steps_per_block = max(1, ROWS_PER_BLOCK // producer.batch_size)
        self._block: tuple[int, torch.Tensor, np.ndarray] | None = None

    def rows(self, step: int) -> tuple[torch.Tensor, np.ndarray]:
        """The tokens ``[batch, pos]`` of ``step`` and the per-row values ``generate`` returned."""
        m, b = self.steps_per_block, self.producer.batch_size
        block = step // m
        if self._block is None or self._block[0] != block:
            draws = [self.draw(self.producer.generator(s)) for s in range(block * m, block * m + m)]
            tokens, per_row = self.generate(
                *(np.concatenate(arrays) for arrays in zip(*draws, strict=True))
            )
            self._block = (block, tokens, per_row)
        i = (step - block * m) * b
        return self._block[1][i : i + b].clone(), self._block[2][i : i + b]
