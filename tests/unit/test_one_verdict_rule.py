"""One rule for the top set: no head at chance joins the default (global) top set; [B]'s per-layer
protocol keeps its heads and says which lack the signature; every verdict names its analysis,
the p over distinct sets when draws repeat, and the reason of every NaN."""

from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import pytest
import torch

import ihprobe
from ihprobe.causal.ablation import chance_of
from ihprobe.causal.choices import DEFAULT_SCOPE, DEFAULT_TOP, analysis
from ihprobe.causal.head_sets import without_signature
from ihprobe.cli import ablate as ablate_cli
from ihprobe.cli import build_parser, main
from ihprobe.core.standin import id_tokenizer
from tests.helpers import save_checkpoint, tiny_hf_model

VOCAB = 64


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    hf = tiny_hf_model("gpt-neox", vocab_size=VOCAB, heads=4)
    return ihprobe.load(save_checkpoint(hf, tmp_path_factory.mktemp("m"), id_tokenizer(VOCAB)))


def _planted(floor: float) -> torch.Tensor:
    """Two signature heads in layer 1, one just above the floor in layer 0, the rest at chance."""
    scores = torch.full((2, 4), floor / 4)
    scores[1, 2], scores[1, 0], scores[0, 3] = 0.9, 0.6, floor * 1.5
    scores[0, 1] = floor  # at the floor is at chance
    return scores


def test_the_default_rule_is_global_top_three():
    assert (DEFAULT_SCOPE, DEFAULT_TOP) == ("global", 3)


def test_the_api_and_the_cli_share_the_default_rule():
    """``ihprobe.ablate(model)`` runs what ``ihprobe ablate`` runs; [B]'s protocol is named."""
    api = inspect.signature(ihprobe.ablate).parameters
    cli = build_parser().commands["ablate"]
    for name in ("top", "scope", "baseline", "draws", "by", "mode"):
        assert api[name].default == cli.get_default(name), name
    assert (api["top"].default, api["scope"].default) == (3, "global")


def test_a_head_at_chance_never_joins_the_global_top_set(model):
    floor = 2 * chance_of(model, "prefix_matching", n=None, bos=False)
    assert floor == pytest.approx(2 * sum(1 / (q + 1) for q in range(50, 100)) / 50)
    scores = _planted(floor)
    top4 = dict(scope="global", top=4, random=2, batch=4, metrics=["induction_loss"])
    result = ihprobe.ablate(model, scores=scores, **top4)
    assert result.top_heads == [(0, 3), (1, 0), (1, 2)]  # L0H1 (at the floor) left out
    assert any(
        "left out of the top set at chance" in n and "L0H1" in n for n in result.settings["notes"]
    )
    # a planted fake of the signature at chance everywhere: the set stays, the verdict says why
    flat = ihprobe.ablate(model, scores=torch.full((2, 4), floor / 2), **top4)
    assert len(flat.top_heads) == 4
    assert flat.verdict().answer == "no induction heads to test"


def test_the_per_layer_protocol_says_it_ablates_heads_without_the_signature(model):
    floor = 2 * chance_of(model, "prefix_matching", n=None, bos=False)
    scores = _planted(floor)
    scores[0] = floor / 4  # layer 0: no head above chance
    result = ihprobe.ablate(
        model, scores=scores, scope="layer", top=1, random=2, batch=4, metrics=["induction_loss"]
    )
    assert result.top_heads[0][0] == 0 and (1, 2) in result.top_heads  # [B]'s set is kept
    notes = result.settings["notes"]
    assert any(
        "without the signature" in n and "layer 0 has no head above chance" in n for n in notes
    )
    assert not any("L1H2" in n for n in notes)


def test_without_signature_leaves_a_set_above_chance_alone():
    scores = torch.tensor([[0.5, 0.4], [0.3, 0.2]])
    assert without_signature(scores, [(0, 0), (1, 1)], 0.1, scope="global", by="ps") == (
        [(0, 0), (1, 1)],
        [],
    )


def test_the_analysis_is_named_in_words():
    said = analysis({"scope": "global", "top": 3, "baseline": "score-matched"}, "ps", 20)
    assert said == "the model's top 3 heads by ps against 20 score-matched random draws"
    assert analysis({"top": "given", "baseline": "global"}, "ps", 5).startswith("the given heads")


def _row(**changes):
    row = dict(
        metric="hits@1",
        clean=0.0,
        change=0.0,
        random_change_mean=0.0,
        random_change_lo=0.0,
        random_change_hi=0.0,
        p_value=1.0,
        p_distinct=1.0,
        distinct_sets=9,
        load_bearing_index=math.nan,
        load_bearing_lo=math.nan,
        load_bearing_hi=math.nan,
    )
    return SimpleNamespace(**{**row, **changes})


def test_every_nan_has_its_reason():
    assert ablate_cli._nan_reasons(_row(load_bearing_index=1.0, load_bearing_lo=0.5)) == []
    (alike,) = ablate_cli._nan_reasons(_row())
    assert "changed hits@1 alike" in alike and "spread of 0" in alike
    (one,) = ablate_cli._nan_reasons(_row(distinct_sets=1))
    assert "one distinct random set" in one
    undefined = ablate_cli._nan_reasons(_row(change=math.nan, p_value=math.nan))
    assert undefined == ["hits@1 is undefined on the clean or ablated model"]


@pytest.mark.slow  # one CLI ablation of a tiny model: about 5 s of CPU with the load
def test_ablate_prints_its_analysis_and_the_distinct_p(tmp_path, capsys):
    source = save_checkpoint(
        tiny_hf_model("gpt-neox", vocab_size=VOCAB, heads=4), tmp_path / "m", id_tokenizer(VOCAB)
    )
    flags = ["--draws", "30", "--batch", "4", "--metrics", "induction_loss", "--top", "1"]
    assert main(["ablate", str(source), "--out", str(tmp_path / "out"), *flags]) == 0
    out = capsys.readouterr().out
    assert "analysis: the model's top 1 heads by prefix_matching against 30 layer-matched" in out
    assert "score-matched: --baseline score-matched" in out
    # one head of layer L against the other 3 heads of layer L: 3 distinct sets for 30 draws
    assert "over 3 distinct sets" in out
