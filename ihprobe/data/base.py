"""The one interface every data producer shares.

A producer is a deterministic function of ``(seed, step)``: ``producer.sample(step)`` returns the
same ``[batch_size, context]`` batch whenever it is called with the same step, in any order. So a
resumed run continues exactly, and DDP ranks can each take their rows of the same global batch.

>>> from ihprobe.data import make_producer
>>> p = make_producer("iid", batch_size=4, context=16, seed=0, vocab_size=64)
>>> b = p.sample(step=3)
>>> tuple(b.tokens.shape), b.tokens.dtype
((4, 16), torch.int64)
"""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from jaxtyping import Int

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.data.options import ProducerOptions

SHARED = ("batch_size", "context", "seed", "total_steps")  # settings outside a producer's options


@dataclass
class Batch:
    """One training batch and what was realised in it.

    Example:
        >>> Batch(torch.zeros(2, 8, dtype=torch.long), {"snippet_fraction": 0.0}).tokens.shape
        torch.Size([2, 8])
    """

    tokens: Int[torch.Tensor, "batch pos"]  # int64 token ids, [batch_size, context]
    info: dict[str, float] = field(default_factory=dict)  # e.g. {"snippet_fraction": 0.47}


class Producer(ABC):
    """A seeded, vectorised source of token batches.

    Subclasses declare their options as an ``Options`` dataclass (see
    :mod:`ihprobe.data.options`), set ``vocab_size`` and ``special`` in ``__init__`` from
    ``self.options``, and implement ``sample`` (and ``tokenizer`` when ids have a text form).

    Example:
        >>> from ihprobe.data import make_producer
        >>> producer = make_producer("iid", batch_size=2, context=8, vocab_size=16)
        >>> isinstance(producer, Producer), producer.sample(0).tokens.shape
        (True, torch.Size([2, 8]))
    """

    name: ClassVar[str]  # registry name, e.g. "bi-induct"
    Options: ClassVar[type[ProducerOptions]] = ProducerOptions  # the producer's options
    vocab_size: int  # number of token ids the model must embed
    special: dict[str, int]  # special token ids, e.g. {"eos": 0, "sep": 1}
    measure_from: float = 0.0  # share of each row before which repetition is not measured

    def __init__(
        self, *, batch_size: int, context: int, seed: int = 0, total_steps: int = 1, **options: Any
    ):
        self.batch_size = batch_size  # B: sequences per update (the global batch)
        self.context = context  # C: tokens per sequence
        self.seed = seed  # with the step, fixes every random draw
        self.total_steps = total_steps  # T_total, for producers that anneal over training
        self.options = self.Options.from_json(options, self.name)  # checked and normalised

    def __init_subclass__(cls, **kwargs):
        """Every producer's ``sample`` checks its step at the door: ``sample(-1)`` or
        ``sample(1.5)`` is one line naming ``step``, not a batch."""
        super().__init_subclass__(**kwargs)
        sample = cls.__dict__.get("sample")
        if sample is not None and not getattr(sample, "__isabstractmethod__", False):

            @functools.wraps(sample)
            def checked(self, step, *args, **kw):
                return sample(self, checks.count("step", step, low=0), *args, **kw)

            cls.sample = checked

    @abstractmethod
    def sample(self, step: int) -> Batch:
        """The batch for training step ``step``; a pure function of (config, seed, step)."""

    def config(self) -> dict:
        """JSON-serialisable options that rebuild this producer with ``make_producer``."""
        return {**self.base_config(), **self.options.to_json()}

    def base_config(self) -> dict:
        """The options every producer shares, for ``config()`` to extend."""
        return {name: getattr(self, name) for name in SHARED}

    def tokenizer(self):
        """An HF tokenizer for this producer's ids, or None when tokens have no text form."""
        return None

    def save_tokenizer(self, directory: str | Path) -> None:
        """Write the tokenizer files into ``directory`` (a no-op when there is none)."""
        tok = self.tokenizer()
        if tok is not None:
            tok.save_pretrained(str(directory))

    def generator(self, step: int, stream: int = 0) -> torch.Generator:
        """A CPU generator seeded by (seed, step, stream): independent draws for every step."""
        key = f"{self.name}:{self.seed}:{step}:{stream}".encode()
        g = torch.Generator()
        g.manual_seed(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1)
        return g


def check_probability(name: str, value: float) -> float:
    """``value`` as a float, or an :class:`IhprobeError` when it is not in [0, 1]."""
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise IhprobeError(f"{name}={value} is not a probability: pass a value in [0, 1].")
    return value
