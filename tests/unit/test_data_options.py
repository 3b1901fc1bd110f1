"""Producer options: typed, normalised, and equal after a JSON round trip."""

from __future__ import annotations

import doctest
import importlib
import json
import pkgutil

import pytest
import torch

import ihprobe.data
from ihprobe.core.errors import IhprobeError
from ihprobe.data import PRODUCERS, make_producer, producer_options, producer_options_equal
from ihprobe.data.bi_induct import BiInductOptions
from ihprobe.data.repeats import RepeatsOptions

SMALL = {  # options that make each producer quick to build
    "natural": {"vocab_size": 300},
    "bi-induct": {"vocab_size": 300, "snippet_length": 3},
    "semi-natural": {"vocab_size": 300, "repetition": 0.8, "reliability": 0.5},
    "markov": {"vocab_size": 24, "fit_steps": 20, "marginal": [1, 2] * 12},
    "iid": {"vocab_size": 30, "marginal": "gaussian"},
    "repeats": {"vocab_size": 300, "period": (3, 6), "start": (0, 4)},
    "few-shot": {"vocab_size": 300, "pairs": [("copy", "cat", "cat"), ("copy", "dog", "dog")]},
}
DATA_MODULES = ["ihprobe.data"] + [
    f"ihprobe.data.{m.name}" for m in pkgutil.iter_modules(ihprobe.data.__path__)
]  # every one has worked examples


def test_every_producer_has_small_options():
    assert set(SMALL) == set(PRODUCERS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_config_read_back_from_json_rebuilds_an_equal_producer(name):
    p = make_producer(name, batch_size=4, context=24, seed=2, total_steps=9, **SMALL[name])
    saved = json.loads(json.dumps(p.config()))
    assert saved == p.config()  # config() is plain JSON: lists, not tuples
    q = make_producer(name, **saved)
    assert q.options == p.options and q.config() == p.config()
    assert producer_options(name, saved) == p.options  # the shared keys are not options
    assert producer_options_equal(name, saved, p.config())
    assert torch.equal(q.sample(3).tokens, p.sample(3).tokens)


def test_options_given_as_tuples_equal_the_same_options_read_back_from_json():
    given = {"period": (8, 32), "base": "iid", "vocab_size": 50}  # as a trainer config holds them
    read_back = json.loads(json.dumps(given))
    assert read_back["period"] == [8, 32]
    assert producer_options_equal("repeats", read_back, given)
    assert RepeatsOptions.from_json(read_back) == RepeatsOptions.from_json(given)
    assert not producer_options_equal("repeats", read_back, {**given, "period": (8, 31)})
    # an omitted option equals its default, also among the background's options
    assert producer_options_equal("repeats", {"base": "iid"}, {"base": "iid", "vocab_size": 128})
    assert not producer_options_equal("repeats", {}, {"base": "iid"})


def test_values_take_the_declared_types():
    o = BiInductOptions.from_json({"m0": 1, "snippet_length": 4.0, "base": "iid", "marginal": [1]})
    assert isinstance(o.m0, float) and isinstance(o.snippet_length, int)
    assert o.base_options.marginal == (1.0,) and isinstance(o.base_options.marginal[0], float)
    assert hash(o) == hash(BiInductOptions.from_json(json.loads(json.dumps(o.to_json()))))


def test_bad_options_say_which_values_are_valid():
    with pytest.raises(IhprobeError, match="mixing='rows': use one of token, sequence"):
        BiInductOptions(mixing="rows")
    with pytest.raises(IhprobeError, match="categoriality='mid': use one of None, high, low"):
        producer_options("markov", {"categoriality": "mid"})
    with pytest.raises(IhprobeError, match="snippet_length=2.5"):
        BiInductOptions(snippet_length=2.5)
    with pytest.raises(IhprobeError, match="m0='half'"):
        BiInductOptions(m0="half")
    with pytest.raises(IhprobeError, match="producer 'iid' has no option colour"):
        producer_options("repeats", {"base": "iid", "colour": 1})
    with pytest.raises(IhprobeError, match="not 'iid'"):
        producer_options("iid", {"name": "markov"})
    with pytest.raises(IhprobeError, match="unknown producer"):
        producer_options_equal("nope", {}, {})


@pytest.mark.parametrize("name", DATA_MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
