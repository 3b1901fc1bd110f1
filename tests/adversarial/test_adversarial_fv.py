"""Bad input to ``ihprobe.fv_scores`` gets one clear line (an IhprobeError) before any model
work: counts that are not counts, an unknown method, a model without a text tokenizer, an empty
or doubled task list, a task file that is not pairs."""

from __future__ import annotations

import pytest

import ihprobe
from ihprobe.causal.tasks import Task
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.planted_fv import PAIRS, save_planted

PAIRS_TASK = Task("planted", PAIRS)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return ihprobe.load(save_planted(tmp_path_factory.mktemp("fv-bad")))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shots": 0}, "shots"),
        ({"shots": 2.5}, "shots"),
        ({"shots": True}, "shots"),
        ({"prompts": 1}, "prompts"),
        ({"seed": -1}, "seed"),
        ({"method": "slow"}, "method"),
        ({"tasks": []}, "tasks is empty"),
    ],
)
def test_bad_settings_are_refused_in_one_line(planted, kwargs, match):
    with pytest.raises(IhprobeError, match=match) as caught:
        ihprobe.fv_scores(planted, **{"tasks": [PAIRS_TASK], **kwargs})
    assert "\n" not in str(caught.value)


def test_a_model_with_token_ids_only_is_refused(tmp_path):
    hf = tiny_hf_model("gpt2", vocab_size=64)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "m", id_tokenizer(64)))
    with pytest.raises(IhprobeError, match="tokenizer that reads text"):
        ihprobe.fv_scores(model)


def test_task_files_that_are_not_pairs_or_share_a_name_are_refused(planted, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"pairs": [["only one"]]}')
    with pytest.raises(IhprobeError, match="not a list of"):
        ihprobe.fv_scores(planted, [bad])
    good = tmp_path / "good.tsv"
    good.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS))
    with pytest.raises(IhprobeError, match="given twice"):
        ihprobe.fv_scores(planted, [good, good])
