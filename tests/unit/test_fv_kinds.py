"""[B]'s question asked of both kinds of head (issue 61, item 3), on the hand-written planted
model of ``tests/planted_fv.py``: its FV head carries the task's accuracy and its induction head
the ICL score, so the 2 x 2 table's cells are known answers."""

from __future__ import annotations

import pytest

import ihprobe
from ihprobe.causal.head_sets import excluding
from ihprobe.causal.kinds import COLUMNS
from ihprobe.causal.results import ANSWERS
from ihprobe.causal.tasks import Task
from ihprobe.core.errors import IhprobeError
from tests.planted_fv import FV_HEAD, INDUCTION_HEAD, PAIRS, save_planted

RANK_ON = Task("planted", PAIRS)
HELD_OUT = Task("held-out queries", PAIRS[4:])
TEXT = "The cat sat on the mat. " * 8  # repeats: the induction head lowers the late loss


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return ihprobe.load(save_planted(tmp_path_factory.mktemp("planted-kinds")))


@pytest.fixture(scope="module")
def scores(planted):
    fv = ihprobe.fv_scores(planted, [RANK_ON], shots=5, prompts=16).scores
    prefix = ihprobe.scan(planted, ["prefix_matching"]).head["prefix_matching"]
    return fv, prefix


def table(planted, scores, **kwargs):
    fv, prefix = scores
    settings = {"top": 1, "scope": "global", "draws": 5, "text": TEXT, "text_rows": 4}
    return ihprobe.kind_table(
        planted, tasks=[RANK_ON], held_out=[HELD_OUT], fv=fv, prefix=prefix, **settings, **kwargs
    )


def test_the_table_tells_the_fv_head_from_the_induction_head(planted, scores):
    t = table(planted, scores)
    assert list(t.frame.columns) == list(COLUMNS) and len(t.frame) == 4
    assert t.results["fv"].top_heads == [FV_HEAD]
    assert t.results["prefix_matching"].top_heads == [INDUCTION_HEAD]
    fv_acc, fv_icl = t.cell("fv", "hits@1"), t.cell("fv", "icl_score")
    ind_acc, ind_icl = t.cell("prefix_matching", "hits@1"), t.cell("prefix_matching", "icl_score")
    # without the task vector the decoy wins every held-out prompt; random heads cost far less
    assert fv_acc.change == -1.0 and fv_acc.random_change_mean > -0.5
    assert ind_acc.change == 0.0  # the induction head carries none of the accuracy ...
    assert ind_acc.answer == "signature only"  # ... and random draws (the FV head) cost more
    # the induction head's copies lower the late loss of repeated text: the ICL score rises
    assert ind_icl.change > 0.3 and ind_icl.random_change_mean < ind_icl.change / 2
    assert abs(fv_icl.change) < 0.05 * ind_icl.change
    for cell in (fv_acc, ind_icl):  # moved far more than random, never called a signature
        assert cell.answer in ANSWERS and cell.answer != "signature only"
        assert "mean ablation" in cell.method and cell.verdict.endswith(".")
    lines = str(t).splitlines()
    assert len(lines) == 4 and lines[0].startswith("[fv x hits@1] Ablating L1H1 changes hits@1")


def test_exclusion_spares_the_other_kind(planted, scores):
    fv, prefix = scores
    faked = fv.clone()
    faked[INDUCTION_HEAD] = 2 * float(fv.max())  # the induction head now tops the FV ranking
    plain = table(planted, (faked, prefix))
    assert plain.results["fv"].top_heads == [INDUCTION_HEAD]
    spared = table(planted, (faked, prefix), exclusion=True)
    assert spared.results["fv"].top_heads == [FV_HEAD]
    assert spared.results["fv"].settings["exclude"] == "prefix_matching"
    assert spared.cell("fv", "hits@1").change == -1.0
    assert "sparing the top prefix_matching heads" in spared.cell("fv", "hits@1").method


def test_excluding_ranks_the_other_top_set_last():
    import torch

    s = torch.tensor([[0.9, 0.5, 0.1], [0.8, 0.3, 0.2]])
    other = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    left = excluding(s, other, top=1, scope="layer")
    assert left[0, 0] < s.min() and left[1, 2] < s.min()
    assert torch.equal(left[0, 1:2], s[0, 1:2]) and left[1, 0] == s[1, 0]


def test_ablate_by_fv_ranks_with_fv_scores_and_excludes(planted, scores):
    fv, prefix = scores
    result = ihprobe.ablate(
        planted, by="fv", top=1, scope="global", draws=3, metrics=["hits@1"], tasks=[HELD_OUT]
    )
    assert result.top_heads == [FV_HEAD] and result.by == "fv"
    faked = fv.clone()
    faked[INDUCTION_HEAD] = 2 * float(fv.max())
    spared = ihprobe.ablate(
        planted,
        by="fv",
        scores=faked,
        exclude="prefix_matching",
        top=1,
        scope="global",
        draws=3,
        metrics=["hits@1"],
        tasks=[HELD_OUT],
    )
    assert spared.top_heads == [FV_HEAD] and spared.settings["exclude"] == "prefix_matching"


def test_ablate_by_fv_says_what_to_do_when_no_task_is_done(tmp_path):
    model = ihprobe.load(save_planted(tmp_path / "no-fv", fv=False))
    with pytest.raises(IhprobeError, match="no task is done above chance"):
        ihprobe.ablate(model, by="fv", top=1, scope="global", draws=3, tasks=[RANK_ON])
