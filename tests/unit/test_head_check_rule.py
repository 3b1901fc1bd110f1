"""The head check's rule is validated and its judged lengths said (issue 59, item 11): a rule
that is not a :class:`Rule` is one line (before: AttributeError), thresholds that judge nothing
(NaN, infinite, negative, outside [0, 1]) are refused where the rule is made (before: verdicts),
and a model whose context drops some of the rule's lengths is told which were judged (before:
lengths 25 and 50 left out of a 32-token model's verdict without a word)."""

from __future__ import annotations

import math

import pytest

from ihprobe.causal.head_check import RULE, Rule, head_check
from tests.helpers import one_line, tiny_hf_model


@pytest.fixture(scope="module")
def short_model():
    return tiny_hf_model("gpt-neox", context=32)


@pytest.mark.parametrize("rule", ["bogus", None, 0.1, {"ps": 0.1}, (0.1,)])
def test_a_rule_that_is_not_a_rule_is_one_line(short_model, rule):
    message = one_line(lambda: head_check(short_model, rule))
    assert "rule must be an ihprobe.causal.head_check.Rule" in message


@pytest.mark.parametrize(
    "field, value",
    [
        ("ps", math.nan),
        ("ps", math.inf),
        ("ps", -0.1),
        ("ps", 1.5),
        ("ps", "0.1"),
        ("drop", -math.inf),
        ("drop", math.nan),
        ("drop", -1.0),
        ("copy", math.nan),
        ("cost", math.inf),
        ("lengths", ()),
        ("lengths", (10, 0)),
        ("lengths", (2.5,)),
        ("lengths", "10"),
        ("lengths", 10),
    ],
)
def test_a_threshold_that_judges_nothing_is_refused(field, value):
    message = one_line(lambda: Rule(**{field: value}))
    assert f"Rule({field}=...)" in message


def test_sound_rules_are_kept_as_given():
    assert Rule(ps=0.45).ps == 0.45 and Rule(drop=0.0).drop == 0.0
    assert Rule(lengths=[10, 25]).lengths == (10, 25)  # a list is taken, held as a tuple
    assert RULE == Rule()


def test_the_check_says_which_lengths_it_judged(short_model):
    check = head_check(short_model, batch=4)
    assert set(check.prefix_matching) == {10} and check.skipped == (25, 50)
    assert "judged at n = 10 only: 25 / 50 do not fit twice" in check.reason
    assert "32-token context" in check.reason
    assert check.to_dict()["skipped"] == (25, 50)
    whole = head_check(tiny_hf_model("gpt-neox", context=128), Rule(lengths=(10, 25)), batch=4)
    assert whole.skipped == () and "judged at" not in whole.reason
