"""One name for the random baseline's size (issue 59, item 19): the API's ``random=`` was the
CLI's ``--draws``. ``ablate(draws=...)`` is the name; ``random=`` still works, warns that it is
deprecated and gives the same result; both at once is one line."""

from __future__ import annotations

import pytest

import ihprobe
from ihprobe.io.any_model import as_model
from tests.helpers import one_line, tiny_hf_model

SMALL = {"top": 1, "scope": "global", "n": 8, "batch": 4, "metrics": ["ar_accuracy"]}


@pytest.fixture(scope="module")
def model():
    return as_model(tiny_hf_model("gpt-neox", vocab_size=64, context=64, d_model=32))


def test_draws_and_its_old_name_give_the_same_result(model):
    new = ihprobe.ablate(model, draws=3, **SMALL)
    with pytest.warns(DeprecationWarning, match="random= is now draws="):
        old = ihprobe.ablate(model, random=3, **SMALL)
    assert new.random_heads == old.random_heads and len(new.random_heads) == 3
    assert new.summary().equals(old.summary())
    assert len(ihprobe.ablate(model, **SMALL).random_heads) == 20  # the default


def test_both_names_at_once_are_one_line(model):
    message = one_line(lambda: ihprobe.ablate(model, draws=3, random=3, **SMALL))
    assert "pass draws=... alone" in message
