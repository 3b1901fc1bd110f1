"""Hostile and careless calls of the Python API, round 3 (issue 45): every case is one line.

* Every (argument slot, bad value) pair of
  :data:`tests.adversarial.test_adversarial_api.SLOTS` is its own case (the round-2 table
  tried only each slot's first value fast, the rest in a slow fuzz):
  each must raise :class:`IhprobeError` with a one-line message, under a 64 MB memory cap so a
  huge count is refused by the estimate instead of running.
* The round-3 calls the issue lists (``scan(metrics=3)``, ``text`` ids past the vocabulary,
  ``ranking('bogus')``, ``verdict('')``, ``sample(-1)``, ``predict_emergence`` overflow,
  ``load(tokenizer='bogus')``, ``check_checkpoint`` on a file, ``checkpoints(revisions='step1')``)
  name the argument; a patch whose clean and corrupted inputs agree says its fraction is
  undefined instead of returning NaN, while its patched values stay what they are.
* Every ``TrainConfig`` field is given values of the wrong type and non-finite numbers, and each
  is refused as the config is built or checked, naming the field.
"""

from __future__ import annotations

import dataclasses
import math
from unittest import mock

import pytest
import torch

import ihprobe
from ihprobe.core import memory
from ihprobe.core.errors import IhprobeError
from ihprobe.training.config import TrainConfig, check_config
from tests.adversarial.test_adversarial_api import MEMORY_CAP, SLOTS, VOCAB, ids, refused
from tests.adversarial.test_adversarial_api import model as model  # noqa: F401  (the module's fixture)

PAIRS = [(slot, value) for slot in SLOTS for value in slot.bad]


@pytest.fixture(autouse=True)
def capped_memory():
    with mock.patch.object(memory, "available_bytes", lambda device="cpu": MEMORY_CAP):
        yield


@pytest.mark.parametrize(
    "slot, value", PAIRS, ids=[f"{s.name}-{i}" for s in SLOTS for i in range(len(s.bad))]
)
def test_every_bad_value_of_every_slot_is_one_line(slot, value, model):  # noqa: F811
    refused(slot, model, value)


# ----------------------------------------------------------------------------- round 3 calls


def effects(model):  # noqa: F811
    return ihprobe.head_effects(model, ["ar_accuracy"], batch=2)


ROUND3 = {
    "scan(metrics=3)": (lambda m: ihprobe.scan(m, metrics=3), "metrics"),
    "scan(metrics=[3])": (lambda m: ihprobe.scan(m, metrics=[3]), "metrics"),
    "scan(metrics={})": (lambda m: ihprobe.scan(m, metrics={}), "metrics"),
    "scan(text=3)": (lambda m: ihprobe.scan(m, text=3), "text"),
    "scan(text=[])": (lambda m: ihprobe.scan(m, text=[]), "text"),
    "scan(text=[1, 2])": (lambda m: ihprobe.scan(m, text=[1, 2]), "text"),
    "scan(text=None-ish)": (lambda m: ihprobe.scan(m, text=object()), "text"),
    "scan(text=ids past vocab)": (
        lambda m: ihprobe.scan(m, "icl_score", text=ids([1, 2, VOCAB + 5] * 20)),
        "text holds ids",
    ),
    "scan(text=negative ids)": (
        lambda m: ihprobe.scan(m, "icl_score", text=ids([1, -2, 3] * 20)),
        "text holds ids",
    ),
    "scan(text=float ids)": (lambda m: ihprobe.scan(m, text=ids([1.0, 2.0] * 20)), "text"),
    "ranking('bogus')": (lambda m: effects(m).ranking("bogus"), "metric"),
    "ranking('')": (lambda m: effects(m).ranking(""), "metric"),
    "ranking(3)": (lambda m: effects(m).ranking(3), "metric"),
    "harm('bogus')": (lambda m: effects(m).harm("bogus"), "metric"),
    "verdict('')": (
        lambda m: ihprobe.ablate(m, random=2, batch=4, metrics=["ar_accuracy"]).verdict(""),
        "metric",
    ),
    "verdict('bogus')": (
        lambda m: ihprobe.ablate(m, random=2, batch=4, metrics=["ar_accuracy"]).verdict("x"),
        "metric",
    ),
    "sample(-1)": (lambda m: producer("iid").sample(-1), "step"),
    "sample(1.5)": (lambda m: producer("iid").sample(1.5), "step"),
    "sample('3')": (lambda m: producer("iid").sample("3"), "step"),
    "sample(None)": (lambda m: producer("iid").sample(None), "step"),
    "markov.sample(-5)": (lambda m: producer("markov").sample(-5), "step"),
    "repeats.sample(-1)": (lambda m: producer("repeats").sample(-1), "step"),
    "bi-induct.sample(2**64)": (lambda m: producer("bi-induct").sample(2**64), "step"),
    "semi-natural.sample(True)": (lambda m: producer("semi-natural").sample(True), "step"),
    "predict(b=1e308)": (lambda m: ihprobe.predict_emergence(4, 64, b=1e308), "too extreme"),
    "predict(c=1e308)": (lambda m: ihprobe.predict_emergence(4, 64, c=1e308), "too extreme"),
    "predict(b=-1e308)": (lambda m: ihprobe.predict_emergence(4, 64, b=-1e308), "too extreme"),
    "predict(B=10**400)": (lambda m: ihprobe.predict_emergence(10**400, 64), "too extreme"),
    "predict(B=1e308)": (lambda m: ihprobe.predict_emergence(1e308, 64), "batch size"),
    "predict(C=0)": (lambda m: ihprobe.predict_emergence(4, 0), "batch size"),
    "load(tokenizer='bogus')": (lambda m: ihprobe.load("x", tokenizer="bogus"), "tokenizer"),
    "load(tokenizer=3)": (lambda m: ihprobe.load("x", tokenizer=3), "tokenizer"),
    "checkpoints(revisions='step1')": (
        lambda m: ihprobe.checkpoints("org/m", revisions="step1"),
        "revisions",
    ),
    "checkpoints(revisions=[1])": (lambda m: ihprobe.checkpoints("o/m", revisions=[1]), "revis"),
    "checkpoints(revisions=3)": (lambda m: ihprobe.checkpoints("org/m", revisions=3), "revisions"),
    "TrainConfig(weight_decay=inf)": (lambda m: TrainConfig(weight_decay=math.inf), "weight_decay"),
    "TrainConfig(warmup=nan)": (lambda m: TrainConfig(warmup=math.nan), "warmup"),
    "TrainConfig(grad_clip=inf)": (lambda m: TrainConfig(grad_clip=math.inf), "grad_clip"),
    "TrainConfig(lr=-inf)": (lambda m: TrainConfig(lr=-math.inf), "lr"),
}


def producer(name):
    return ihprobe.make_producer(name, batch_size=2, context=64)


@pytest.mark.parametrize("case", ROUND3)
def test_round3_calls_name_their_argument(case, model):  # noqa: F811
    call, named = ROUND3[case]
    with pytest.raises(IhprobeError) as err:
        call(model)
    message = str(err.value)
    assert named in message and "\n" not in message, message


def test_check_checkpoint_on_a_file_is_one_line(tmp_path):
    from ihprobe.io.validation import check_checkpoint

    file = tmp_path / "config.json"
    file.write_text("{}")
    for target in (file, tmp_path / "missing"):
        with pytest.raises(IhprobeError, match="pass a checkpoint directory"):
            check_checkpoint(target, [])


def test_a_good_step_still_samples_the_same_batch():
    """The step check changes nothing for a valid step: the batch is the producer's own."""
    first, again = producer("iid").sample(3), producer("iid").sample(3)
    assert torch.equal(first.tokens, again.tokens)
    assert torch.equal(producer("iid").sample(torch.tensor(3)).tokens, first.tokens)


def test_identical_clean_and_corrupted_patch_says_undefined(model):  # noqa: F811
    rows = torch.randint(1, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
    result = ihprobe.patch(model, clean=rows, corrupted=rows)
    assert result.clean == result.corrupted and torch.isfinite(result.values).all()
    with pytest.raises(IhprobeError, match="undefined.*0/0"):
        _ = result.fractions
    with pytest.raises(IhprobeError, match="undefined"):
        result.to_frame()


def test_predict_emergence_still_answers_in_range():
    """The reference value of the law's doctest, through the new overflow guard."""
    p = ihprobe.predict_emergence(4, 64)
    assert p.updates == pytest.approx(750_000 / (4**0.37 * 64**0.62))


# ----------------------------------------------------------------------------- TrainConfig


def _bad_values(annotation: str) -> list:
    """Wrong types and non-finite numbers for a field of ``annotation``."""
    common = [[1], {"a": 1}, object()]
    table = {
        "int": ["2", 1.5, math.nan, math.inf, True, None, *common],
        "int | None": ["2", 1.5, math.nan, -math.inf, True, *common],
        "float": ["0.1", math.nan, math.inf, -math.inf, True, None, *common],
        "float | None": ["0.1", math.nan, math.inf, -math.inf, True, *common],
        "bool": [1, 0, "yes", None, 1.0, *common],
        "str": [None, 3, 1.5, True, *common],
        "dict": [[1], "a=1", 3, None],
        "str | tuple[int, ...]": [5, None, ("a",), (1.5,), [True], {"a": 1}],
        "tuple[str, ...]": ["runs/a", (1,), [None], 3, None],
    }
    return table.get(annotation, [])


CONFIG_CASES = [
    (f.name, value)
    for f in dataclasses.fields(TrainConfig)
    for value in _bad_values(f.type)
    if f.name != "out"
]


@pytest.mark.parametrize(
    "name, value", CONFIG_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIG_CASES)]
)
def test_every_config_field_refuses_wrong_types_and_non_finite_values(name, value):
    with pytest.raises(IhprobeError) as err:
        check_config(TrainConfig(**{name: value}))
    message = str(err.value)
    assert name in message and "\n" not in message, message
