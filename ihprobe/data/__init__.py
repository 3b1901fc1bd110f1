"""Data producers: seeded, vectorised sources of ``[batch, context]`` token batches.

Names: "natural" (text files or the embedded default corpus), "bi-induct" (natural text with
forward/backward copy snippets), "semi-natural" (a bigram model of real text with repetition
and reliability knobs), "markov" (optimised synthetic transition matrices), "iid" (control),
"repeats" (background text that turns periodic at a random point with a random period),
"few-shot" (natural text with a share of rows of few-shot function prompts).

>>> from ihprobe.data import make_producer
>>> p = make_producer("iid", batch_size=4, context=16, seed=0, vocab_size=64)
>>> q = make_producer("iid", **p.config())          # a config rebuilds the same producer
>>> bool((p.sample(7).tokens == q.sample(7).tokens).all())
True

Each producer's options are a frozen dataclass (``producer.options``, see
:mod:`ihprobe.data.options`); ``producer_options_equal(name, a, b)`` compares two option
mappings as the producer reads them, e.g. a run's saved options with the ones given again.

This package's names are the data surface scripts build on (``lab/studies/``): the producer types
(subclass :class:`Producer` for a source of your own and add it to :data:`PRODUCERS`), the text
corpus (``load_corpus``, ``TextOptions``, ``TEXT_SUFFIXES``, ``default_directory``: the
documentation corpus ``make corpus`` builds), [A]'s repetition/reliability measure and
``corpus_stats``. With ``ihprobe``'s own names they are the public surface
(docs/architecture.md, "Public names").
"""

from __future__ import annotations

from ihprobe.data.base import Batch, Producer
from ihprobe.data.bi_induct import BiInductProducer
from ihprobe.data.few_shot import FewShotProducer
from ihprobe.data.iid import IIDProducer
from ihprobe.data.installed_docs import default_directory
from ihprobe.data.markov import MarkovProducer
from ihprobe.data.options import ProducerOptions
from ihprobe.data.registry import (
    PRODUCERS,
    make_producer,
    producer_options,
    producer_options_equal,
)
from ihprobe.data.repeats import RepeatsProducer
from ihprobe.data.seminatural import SemiNaturalProducer
from ihprobe.data.stats import corpus_stats, repetition_reliability
from ihprobe.data.text import TEXT_SUFFIXES, NaturalProducer, TextOptions, load_corpus

PRODUCERS.update(
    {
        "natural": NaturalProducer,
        "bi-induct": BiInductProducer,
        "semi-natural": SemiNaturalProducer,
        "markov": MarkovProducer,
        "iid": IIDProducer,
        "repeats": RepeatsProducer,
        "few-shot": FewShotProducer,
    }
)

__all__ = [
    "PRODUCERS",
    "TEXT_SUFFIXES",
    "Batch",
    "FewShotProducer",
    "IIDProducer",
    "Producer",
    "ProducerOptions",
    "SemiNaturalProducer",
    "TextOptions",
    "corpus_stats",
    "default_directory",
    "load_corpus",
    "make_producer",
    "producer_options",
    "producer_options_equal",
    "repetition_reliability",
]
