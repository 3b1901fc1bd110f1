"""Producers by name: build one from its options, and compare two sets of options.

``PRODUCERS`` is filled by :mod:`ihprobe.data` when the package is imported; producers that
write over a background producer (Bi-Induct, repeats) build it through :func:`make_producer`.

>>> import json
>>> from ihprobe.data import make_producer
>>> p = make_producer("repeats", batch_size=2, context=16, base="iid", period=(2, 4))
>>> saved = json.loads(json.dumps(p.config()))          # the period comes back as a list
>>> producer_options_equal("repeats", saved, {"base": "iid", "period": (2, 4), "start": [0, 8]})
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ihprobe.core import calls, checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import check_memory
from ihprobe.data.base import SHARED, Producer
from ihprobe.data.options import ProducerOptions

PRODUCERS: dict[str, type[Producer]] = {}  # name -> class, filled by ihprobe.data
# Bytes of a producer's tables by vocabulary size: the Markov producer fits a [vocab, vocab]
# matrix with Adam (weights, gradient, two moments, the result); others hold a few vectors.
TABLE_BYTES = {"markov": lambda vocab: 6 * 4 * vocab * vocab}


def make_producer(
    name: str,
    /,
    *,
    batch_size: int,
    context: int,
    seed: int = 0,
    total_steps: int = 1,
    **options: Any,
) -> Producer:
    """Build the producer ``name`` with its options (see each producer's ``Options``).

    ``make_producer(name, **producer.config())`` rebuilds an equal producer; a ``name`` key in
    the options (as stored in run configs) is accepted when it matches.

    Args:
        name: one of ``PRODUCERS``.
        batch_size: sequences per update.
        context: tokens per sequence.
        seed: fixes every random draw together with the step.
        total_steps: length of training, for producers that anneal (Bi-Induct).
        options: producer-specific options.

    Example:
        >>> producer = make_producer("iid", batch_size=2, context=8, seed=0, vocab_size=16)
        >>> producer.sample(0).tokens.shape
        torch.Size([2, 8])
    """
    options = _without_name(name, options)
    batch_size, context = (
        checks.count("batch_size", batch_size),
        checks.count("context", context, low=2),
    )
    calls.arguments(seed=seed, total_steps=total_steps)
    vocab = checks.optional_count("vocab_size", options.get("vocab_size")) or 0
    table = TABLE_BYTES.get(name, lambda v: 32 * v)(vocab)
    check_memory(f"the {name} producer (vocab_size={vocab})", table + 32 * batch_size * context)
    return producer_class(name)(
        batch_size=batch_size, context=context, seed=seed, total_steps=total_steps, **options
    )


def producer_class(name: str) -> type[Producer]:
    """The producer class registered as ``name``, or an error listing the names."""
    if name not in PRODUCERS:
        raise IhprobeError(
            f"unknown producer {name!r}: choose one of {', '.join(sorted(PRODUCERS))}."
        )
    return PRODUCERS[name]


def producer_options(name: str, options: Mapping[str, Any]) -> ProducerOptions:
    """The typed options of producer ``name`` from a mapping (as given, or read from JSON).

    Keys shared by every producer (``batch_size``, ``context``, ``seed``, ``total_steps``) are
    not options and are left out, so a whole ``producer.config()`` may be passed.

    Example:
        >>> options = producer_options("iid", {"vocab_size": 16})
        >>> options.vocab_size
        16
    """
    options = {k: v for k, v in _without_name(name, options).items() if k not in SHARED}
    return producer_class(name).Options.from_json(options, name)


def producer_options_equal(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two option mappings configure producer ``name`` the same way.

    Both are normalised first (lists and tuples alike, numbers by type, omitted options as
    their defaults), so options saved to JSON equal the options they were saved from.

    >>> producer_options_equal("iid", {"marginal": [1, 2]}, {"marginal": (1.0, 2.0)})
    True
    >>> producer_options_equal("iid", {}, {"vocab_size": 64})
    False
    """
    return producer_options(name, a) == producer_options(name, b)


def _without_name(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    if options.get("name", name) != name:
        raise IhprobeError(f"config is for producer {options['name']!r}, not {name!r}.")
    return {k: v for k, v in options.items() if k != "name"}
