"""The 2 x 2 table of ``kind_table`` reaching each verdict where it should (issue 61, item 3), on
the planted FV model widened to 24 heads a layer (``tests/planted_fv_wide.py``). The 4-head
model of ``test_fv_kinds.py`` has 3 other heads a layer, so a layer-matched one-head baseline has
3 distinct sets and p cannot go below 1/4: "load-bearing" is out of its reach. Here 23 exist and
20 distinct draws give p = 1/21 when no draw costs as much as the top head."""

from __future__ import annotations

import math

import pytest

import ihprobe
from ihprobe.causal.tasks import Task
from tests.planted_fv import FV_HEAD, INDUCTION_HEAD, PAIRS
from tests.planted_fv_wide import WIDE_HEADS, save_wide_planted

RANK_ON = Task("planted", PAIRS)
HELD_OUT = Task("held-out queries", PAIRS[4:])
TEXT = "The cat sat on the mat. " * 8  # repeats: the induction head lowers the late loss
DRAWS = 20

pytestmark = pytest.mark.slow  # a 768-wide model, the table's 42 ablations: about 15 s


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    model = ihprobe.load(save_wide_planted(tmp_path_factory.mktemp("planted-wide")))
    assert model.cfg.n_heads == WIDE_HEADS
    fv = ihprobe.fv_scores(model, [RANK_ON], shots=5, prompts=16)
    assert [h[:2] for h in fv.fv_heads()] == [FV_HEAD]  # the widening kept the planted heads
    prefix = ihprobe.scan(model, ["prefix_matching"], batch=8).head["prefix_matching"]
    settings = {"top": 1, "scope": "global", "draws": DRAWS, "text": TEXT, "text_rows": 4}
    return ihprobe.kind_table(
        model,
        tasks=[RANK_ON],
        held_out=[HELD_OUT],
        fv=fv.scores,
        prefix=prefix,
        **settings,
    )


def test_each_kind_is_load_bearing_for_its_own_measure(table):
    assert table.results["fv"].top_heads == [FV_HEAD]
    assert table.results["prefix_matching"].top_heads == [INDUCTION_HEAD]
    for kind in ("fv", "prefix_matching"):  # enough distinct one-head sets: none repeats
        settings = table.results[kind].settings
        assert not settings["draws_repeat"] and settings["distinct_sets"] == WIDE_HEADS - 1
    fv_acc, ind_icl = table.cell("fv", "hits@1"), table.cell("prefix_matching", "icl_score")
    # without the task vector every held-out prompt is lost; no random one-head set costs any
    assert fv_acc.change == -1.0 and fv_acc.p_value == pytest.approx(1 / (DRAWS + 1))
    assert ind_icl.change > 0.3 and ind_icl.p_value == pytest.approx(1 / (DRAWS + 1))
    for cell in (fv_acc, ind_icl):
        assert cell.answer == "load-bearing" and cell.load_bearing_index > 2
        assert "load-bearing: the model depends on these heads" in cell.verdict


def test_the_other_measure_says_signature_only_or_inconclusive(table):
    fv_icl = table.cell("fv", "icl_score")
    # the FV head leaves the ICL score alone, while a draw that hits the induction head raises it
    assert abs(fv_icl.change) < 0.05 * table.cell("prefix_matching", "icl_score").change
    assert fv_icl.random_change_mean > fv_icl.change
    assert fv_icl.answer == "signature only" and fv_icl.load_bearing_hi < 2
    ind_acc = table.cell("prefix_matching", "hits@1")
    # the induction head carries none of the accuracy; a draw costs accuracy only if it hits the
    # FV head: without such a draw every harm is 0, the index undefined, and the rule says so
    assert ind_acc.change == 0.0
    drawn_fv = any(FV_HEAD in draw for draw in table.results["prefix_matching"].random_heads)
    if drawn_fv:
        assert ind_acc.answer == "signature only"
    else:
        assert math.isnan(ind_acc.load_bearing_index) and ind_acc.answer == "inconclusive"
        assert "meet neither rule" in ind_acc.verdict
