"""Data producers: seeded, vectorised sources of ``[batch, context]`` token batches.

Names: "natural" (text files or the embedded default corpus), "bi-induct" (natural text with
forward/backward copy snippets), "semi-natural" (a bigram model of real text with repetition
and reliability knobs), "markov" (optimised synthetic transition matrices), "iid" (control),
"repeats" (background text that turns periodic at a random point with a random period).

>>> from ihprobe.data import make_producer
>>> p = make_producer("iid", batch_size=4, context=16, seed=0, vocab_size=64)
>>> q = make_producer("iid", **p.config())          # a config rebuilds the same producer
>>> bool((p.sample(7).tokens == q.sample(7).tokens).all())
True
"""

from __future__ import annotations

import inspect

from ihprobe.data.base import Batch, Producer
from ihprobe.data.bi_induct import BiInductProducer
from ihprobe.data.iid import IIDProducer
from ihprobe.data.markov import MarkovProducer
from ihprobe.data.repeats import RepeatsProducer
from ihprobe.data.seminatural import SemiNaturalProducer
from ihprobe.data.text import NaturalProducer
from ihprobe.errors import IhprobeError

PRODUCERS: dict[str, type[Producer]] = {
    "natural": NaturalProducer,
    "bi-induct": BiInductProducer,
    "semi-natural": SemiNaturalProducer,
    "markov": MarkovProducer,
    "iid": IIDProducer,
    "repeats": RepeatsProducer,
}


def make_producer(
    name: str,
    /,
    *,
    batch_size: int,
    context: int,
    seed: int = 0,
    total_steps: int = 1,
    **options,
) -> Producer:
    """Build the producer ``name`` with its options (see each class for them).

    ``make_producer(name, **producer.config())`` rebuilds an equal producer; a ``name`` key in
    the options (as stored in run configs) is accepted when it matches.

    Args:
        name: one of ``PRODUCERS``.
        batch_size: sequences per update.
        context: tokens per sequence.
        seed: fixes every random draw together with the step.
        total_steps: length of training, for producers that anneal (Bi-Induct).
        options: producer-specific options.
    """
    if options.get("name", name) != name:
        raise IhprobeError(f"config is for producer {options['name']!r}, not {name!r}.")
    options.pop("name", None)
    if batch_size < 1 or context < 2:
        raise IhprobeError(
            f"batch_size={batch_size}, context={context}: need batch_size >= 1 and context >= 2."
        )
    if name not in PRODUCERS:
        raise IhprobeError(
            f"unknown producer {name!r}: choose one of {', '.join(sorted(PRODUCERS))}."
        )
    cls = PRODUCERS[name]
    params = inspect.signature(cls).parameters
    known = {k for k, v in params.items() if v.kind != inspect.Parameter.VAR_KEYWORD}
    forwards = any(v.kind == inspect.Parameter.VAR_KEYWORD for v in params.values())
    unknown = sorted(set(options) - known)
    if unknown and not forwards:  # a wrapper (bi-induct) checks its base's options itself
        valid = sorted(known - {"batch_size", "context", "seed", "total_steps"})
        raise IhprobeError(
            f"producer {name!r} has no option {', '.join(unknown)}; its options are: "
            f"{', '.join(valid)}."
        )
    return cls(
        batch_size=batch_size, context=context, seed=seed, total_steps=total_steps, **options
    )


__all__ = ["PRODUCERS", "Batch", "Producer", "make_producer"]
