"""FV scores in reports and in the attention viewer's head picker (issue 61, item 7), on the
planted FV model of ``tests/planted_fv.py``: the view shows the scores the caller computed (from
an ``FVResult`` or its frame) beside prefix matching, escapes every name, and a report without
them says why in one line."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

import ihprobe
from ihprobe.causal.tasks import Task
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.figures.fv import fv_grid, fv_heads_frame, fv_note, fv_section
from ihprobe.figures.report import html_page
from ihprobe.figures.viewer import attention_viewer
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.planted_fv import FV_HEAD, INDUCTION_HEAD, PAIRS, save_planted

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return ihprobe.load(save_planted(tmp_path_factory.mktemp("planted-view")))


@pytest.fixture(scope="module")
def result(planted):
    return ihprobe.fv_scores(planted, [Task(HOSTILE, PAIRS)], shots=5, prompts=8)


@pytest.fixture(scope="module")
def prefix(planted):
    return ihprobe.scan(planted, ["prefix_matching"], batch=20).head["prefix_matching"]


def payload(viewer: str) -> dict:
    found = re.search(r'<script type="application/json">(.*?)</script>', viewer, re.S)
    return json.loads(found.group(1))


def test_the_head_table_puts_fv_beside_prefix_matching(result, prefix):
    table = fv_heads_frame(result, prefix, k=3)
    assert list(table.columns) == ["head", "FV score", "FV head", "prefix matching"]
    first, second = table.iloc[0], table.iloc[1]
    assert first["head"] == "L{}H{}".format(*FV_HEAD) and first["FV head"] == "yes"
    assert first["FV score"] == pytest.approx(float(result.scores[FV_HEAD]))
    # the induction head: second by FV, under the effect floor, first by prefix matching
    assert second["head"] == "L{}H{}".format(*INDUCTION_HEAD) and second["FV head"] == ""
    assert second["prefix matching"] == pytest.approx(float(prefix[INDUCTION_HEAD]))
    assert second["prefix matching"] > 0.9 > 0.2 > first["prefix matching"]


def test_the_section_escapes_every_name_and_says_what_ran(result, prefix):
    page = html_page("FV", [fv_section(result, prefix)])
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "5 shots, 8 clean and as many label-shuffled prompts" in page
    assert "How to read this" in page and "FV heads (score &gt;=" in page
    with pytest.raises(IhprobeError, match="must be an FVResult"):
        fv_section(result.to_frame())


def test_a_section_without_a_task_done_says_so(tmp_path):
    model = ihprobe.load(save_planted(tmp_path / "no-fv", fv=False))
    found = ihprobe.fv_scores(model, [Task("planted", PAIRS)], shots=5, prompts=8)
    page = html_page("FV", [fv_section(found)])
    assert "No task is done above chance, so no head has an FV score" in page
    assert "FV score and prefix matching" not in page  # no heatmap of NaNs


def test_the_grid_is_the_same_from_the_result_and_its_frame(result):
    assert torch.equal(fv_grid(result), fv_grid(result.to_frame()))
    with pytest.raises(IhprobeError, match="FVResult or its to_frame"):
        fv_grid({"score": 1})
    with pytest.raises(IhprobeError, match="no rows of task 'all'"):
        fv_grid(result.to_frame().query("task != 'all'"))


def test_the_head_picker_shows_fv_beside_prefix_matching(planted, result, prefix):
    prompt = result.tasks[0].clean
    tokens = prompt.tokens[0, : int(prompt.last[0]) + 1]
    plain = payload(attention_viewer(planted, tokens, start=FV_HEAD))
    assert plain["labels"] is None  # no FV given: the picker lists head numbers as before
    data = payload(attention_viewer(planted, tokens, start=FV_HEAD, fv=result))
    layer, head = FV_HEAD
    label = data["labels"][layer][head]
    assert label == (
        f"head {head} · PS {float(prefix[FV_HEAD]):.2f} · FV {float(result.scores[FV_HEAD]):+.3f}"
    )
    assert len(data["labels"]) == planted.cfg.n_layers
    assert all(len(row) == planted.cfg.n_heads for row in data["labels"])
    framed = payload(attention_viewer(planted, tokens, start=FV_HEAD, fv=result.to_frame()))
    assert framed["labels"] == data["labels"]  # the frame serves as well as the result
    # without a start, the viewer opens on the top prefix-matching head it scanned
    assert payload(attention_viewer(planted, tokens, fv=result))["start"] == list(INDUCTION_HEAD)


def test_the_picker_refuses_another_models_scores(planted, result):
    wrong = result.to_frame()
    wrong = wrong[wrong.layer == 0]
    tokens = torch.tensor([1, 3, 4, 5])
    with pytest.raises(IhprobeError, match="pass the FV scores of this model"):
        attention_viewer(planted, tokens, fv=wrong)


def test_a_report_without_fv_says_why_in_one_line(planted, tmp_path):
    ids = tiny_hf_model("gpt2", vocab_size=64, context=32)
    id_only = ihprobe.load(save_checkpoint(ids, tmp_path / "ids", id_tokenizer(64)))
    skipped, not_asked = fv_note(id_only), fv_note(planted)
    assert skipped.startswith("FV scores: skipped: this model reads token ids only")
    assert not_asked.startswith("FV scores: not computed") and "ihprobe fv" in not_asked
    assert "\n" not in skipped + not_asked


def test_nan_scores_show_as_not_available(planted, result):
    nan = result.to_frame()
    nan.loc[nan.task == "all", "score"] = math.nan
    data = payload(attention_viewer(planted, torch.tensor([1, 3, 4, 5]), start=(0, 0), fv=nan))
    assert data["labels"][0][0].endswith("· FV n/a")
