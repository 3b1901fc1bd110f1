"""``ablate(model, heads=[...])`` tests the heads you pick against matched random sets (issue 47):
the given heads are the tested set, every draw is as many other heads of the same layers, and a
head the model lacks is one line."""

from __future__ import annotations

import pytest

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from tests.helpers import save_checkpoint, tiny_hf_model

ROWS = {"n": 8, "batch": 4, "metrics": ["ar_accuracy"]}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("heads")
    model = tiny_hf_model("gpt-neox", vocab_size=64, heads=4, context=32, seed=2)
    return ihprobe.load(save_checkpoint(model, directory, id_tokenizer(64)))


@pytest.mark.parametrize("named", [[(1, 3)], ["L1H3"], ["1.3"]])
def test_the_heads_you_name_are_tested_against_layer_matched_draws(model, named):
    result = ihprobe.ablate(model, heads=named, random=3, **ROWS)
    assert result.top_heads == [(1, 3)]
    assert all(len(d) == 1 and d[0][0] == 1 and d[0] != (1, 3) for d in result.random_heads)
    assert result.settings["top"] == "given" and result.settings["distinct_sets"] == 3


def test_named_heads_differ_from_the_top_set(model):
    top = ihprobe.ablate(model, scope="global", top=1, random=2, **ROWS).top_heads
    other = [(0, 0)] if top != [(0, 0)] else [(0, 1)]
    assert ihprobe.ablate(model, heads=other, random=2, **ROWS).top_heads == other


@pytest.mark.parametrize(
    ("heads", "said"),
    [
        (["L2H0"], "do not exist"),
        (["L1H9"], "do not exist"),
        (["L1"], "is written L1H3 or 1.3"),
        ([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], "too few for the random baseline"),
    ],
)
def test_a_head_the_model_lacks_is_one_line(model, heads, said):
    with pytest.raises(IhprobeError, match=said):
        ihprobe.ablate(model, heads=heads, random=2, **ROWS)
