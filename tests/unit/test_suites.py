"""Revision presets resolve offline: names, steps and tokens of Pythia, PolyPythias, OLMo,
OLMo-2 and timaeus's 2-layer series, against HF hub caches laid out by hand."""

from __future__ import annotations

import pytest

from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.trajectories import trajectory
from ihprobe.io.sources import resolve
from ihprobe.io.suites import PYTHIA_STEPS, suite_checkpoints, suite_repo
from tests import hub_layout
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.hub_layout import lay_out

offline_hub = hub_layout.offline_hub  # the fixture


def tiny(tmp_path, name: str, tokenizer, seed: int = 0):
    return save_checkpoint(
        tiny_hf_model("gpt-neox", seed=seed), tmp_path / "made" / name, tokenizer
    )


def test_pythia_schedule_is_154_branches_with_tokens_from_the_step():
    ckpts = suite_checkpoints("pythia", size="70m", deduped=True)
    assert len(ckpts) == len(PYTHIA_STEPS) == 154
    assert ckpts[0].source == "EleutherAI/pythia-70m-deduped"
    revisions = [c.revision for c in ckpts]
    assert revisions[:12] == ["step0", *(f"step{2**i}" for i in range(10)), "step1000"]
    assert revisions[-1] == "step143000"
    assert all(c.tokens == c.step * 1024 * 2048 for c in ckpts)
    assert suite_repo("polypythias", size="410m", seed=9) == "EleutherAI/pythia-410m-seed9"


def test_bad_options_and_steps_are_one_line():
    with pytest.raises(IhprobeError, match="size='3b' is not one of"):
        suite_checkpoints("pythia", size="3b")
    with pytest.raises(IhprobeError, match="has no step 1500"):
        suite_checkpoints("pythia", steps=[1000, 1500])
    with pytest.raises(IhprobeError, match="no suite named 'gpt5'"):
        suite_checkpoints("gpt5")
    with pytest.raises(IhprobeError, match="has no option 'seed'"):
        suite_repo("pythia", seed=1)


def test_a_pythia_suite_laid_out_offline_scans_with_its_tokens(tmp_path, offline_hub, tokenizer):
    repo = suite_repo("polypythias", size="14m", seed=3)
    made = {f"step{s}": tiny(tmp_path, f"step{s}", tokenizer, seed=s) for s in (0, 1000)}
    lay_out(offline_hub, repo, made)
    ckpts = suite_checkpoints("polypythias", size="14m", seed=3, steps=[1000, 0])
    assert [c.revision for c in ckpts] == ["step0", "step1000"]
    assert all(resolve(c.source, revision=c.revision).is_dir() for c in ckpts)
    table = trajectory(ckpts, ["copying"], cache=False, progress=False)
    assert table.groupby("revision")["tokens"].first().to_dict() == {
        "step0": 0,
        "step1000": 1000 * 2_097_152,
    }


def test_olmo_branches_are_read_from_the_cache_with_their_tokens(tmp_path, offline_hub, tokenizer):
    branches = ["main", "step20000-tokens84B", "step1000-tokens4B", "step330000-tokens1384B"]
    made = {b: tiny(tmp_path, b, tokenizer) for b in branches}
    lay_out(offline_hub, suite_repo("olmo", size="1B"), made)
    ckpts = suite_checkpoints("olmo", size="1B", hub_cache=offline_hub)
    assert [(c.revision, c.step, c.tokens) for c in ckpts] == [
        ("step1000-tokens4B", 1000, 4 * 10**9),
        ("step20000-tokens84B", 20000, 84 * 10**9),
        ("step330000-tokens1384B", 330000, 1384 * 10**9),
    ]
    assert [c.revision for c in suite_checkpoints("olmo", size="1B", steps=[20000])] == [
        "step20000-tokens84B"
    ]


def test_olmo2_stages_and_ingredients(tmp_path, offline_hub, tokenizer):
    branches = [
        "stage1-step928646-tokens3896B",
        "stage1-step1000-tokens5B",
        "stage2-ingredient2-step11931-tokens50B",
        "stage2-ingredient1-step11931-tokens50B",
        "stage2-ingredient1-step1000-tokens5B",
    ]
    made = {b: tiny(tmp_path, b, tokenizer) for b in branches}
    lay_out(offline_hub, suite_repo("olmo2", model="1124-7B"), made)
    first = suite_checkpoints("olmo2", model="1124-7B")
    assert [(c.step, c.tokens) for c in first] == [(1000, 5 * 10**9), (928646, 3896 * 10**9)]
    second = [c.revision for c in suite_checkpoints("olmo2", model="1124-7B", stage=2)]
    assert second == branches[4:2:-1] + [branches[2]]


def test_timaeus_checkpoint_files_are_named_by_step(tmp_path, offline_hub):
    files = tmp_path / "made" / "main" / "checkpoints"
    files.mkdir(parents=True)
    for step in (4600, 0, 300):
        (files / f"checkpoint_{step:07d}.pth").write_bytes(b"state dict")
    (files.parent / "losses.txt").write_text("1.0\n")
    lay_out(offline_hub, "timaeus/L2W256-s-3", {"main": files.parent})
    ckpts = suite_checkpoints("timaeus-l2w256", seed=3)
    assert [c.step for c in ckpts] == [0, 300, 4600]
    assert ckpts[-1].revision == "main:checkpoints/checkpoint_0004600.pth"


def test_a_suite_missing_from_the_cache_says_what_to_do(offline_hub):
    with pytest.raises(IhprobeError, match="huggingface-cli download allenai/OLMo-7B-hf"):
        suite_checkpoints("olmo", size="7B")
