"""Per-tensor hashes flag a checkpoint one of whose shards repeats an earlier checkpoint's (the
case a whole-checkpoint hash misses), in a sharded suite laid out as an offline hub cache."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch

from ihprobe.dynamics.trajectories import trajectory
from ihprobe.io.runs import checkpoints
from ihprobe.io.sources import resolve
from ihprobe.io.tensor_reads import cached_digests, read_checkpoint
from ihprobe.io.weights import weights_hash
from ihprobe.series.repeats import Repeats, constant_by_design, repeated_tensors
from tests import hub_layout
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.hub_layout import lay_out

offline_hub = hub_layout.offline_hub  # the fixture

REPO = "org/sharded"
REVISIONS = ["step100", "step200", "step300"]
SHARD = "model-00002-of-00004.safetensors"


def trained_looking(seed: int):
    """A tiny GPT-NeoX whose every tensor moved off its initial value (a fresh model's zero
    biases and unit norms are the same in every seed, as no trained checkpoint's are)."""
    model = tiny_hf_model("gpt-neox", seed=seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    return model


@pytest.fixture
def suite(tmp_path, offline_hub, tokenizer):
    """Three revisions of a 4-shard GPT-NeoX; step300 carries step200's second shard."""
    made = {}
    for seed, revision in enumerate(REVISIONS):
        directory = tmp_path / "made" / revision
        save_checkpoint(trained_looking(seed), directory, tokenizer)
        for old in directory.glob("model*.safetensors*"):
            old.unlink()
        trained_looking(seed).save_pretrained(directory, max_shard_size="200KB")
        made[revision] = directory
    assert len(list(made["step300"].glob("model-*.safetensors"))) == 4
    shutil.copyfile(made["step200"] / SHARD, made["step300"] / SHARD)  # the planted repeat
    lay_out(offline_hub, REPO, made)
    return checkpoints(REPO, REVISIONS)


def test_a_repeated_shard_is_flagged_with_the_checkpoint_it_repeats(suite):
    paths = [resolve(c.source, revision=c.revision) for c in suite]
    assert len({weights_hash(p) for p in paths}) == 3  # no whole-checkpoint duplicate
    table = repeated_tensors(suite)
    assert set(table["checkpoint"]) == {f"{REPO}@step300"}
    assert set(table["shard"]) == {SHARD} and table["whole_shard"].all()
    assert set(table["repeats"]) == {f"{REPO}@step200"}
    in_shard = {n for n, f in cached_digests(paths[2]).files.items() if f == SHARD}
    assert set(table["tensor"]) == {n for n in in_shard if not constant_by_design(n)}


def test_the_sweep_logs_the_repeated_shard_and_its_rows_stay_its_own(suite, caplog):
    with caplog.at_level(logging.WARNING, logger="ihprobe.series.repeats"):
        table = trajectory(REPO, ["copying"], revisions=REVISIONS, cache=False, progress=False)
    flagged = [r.getMessage() for r in caplog.records if "repeats" in r.getMessage()]
    last = read_checkpoint(resolve(REPO, revision="step300"), in_cache=False).digests
    count = sum(f == SHARD and not constant_by_design(n) for n, f in last.files.items())
    assert count > 1
    said = f"shard {SHARD} ({count} tensors) repeats {REPO}@step200"
    assert flagged == [f"{REPO}@step300: {said}"]
    assert table["duplicate_of"].isna().all()
    by_revision = table.groupby("revision")["repeats"].agg(lambda r: set(r.dropna()))
    assert by_revision.to_dict() == {"step100": set(), "step200": set(), "step300": {said}}


def test_a_whole_duplicate_or_nothing_repeated_is_not_a_partial_repeat():
    from ihprobe.io.tensor_reads import Digests

    first = Digests({"a": "1" * 64, "b": "2" * 64}, {"a": "x", "b": "y"})
    fresh = Digests({"a": "3" * 64, "b": "4" * 64}, {"a": "x", "b": "y"})
    repeats = Repeats()
    assert repeats.check("s1", first) is None
    assert repeats.check("s2", first) is None  # every tensor: duplicate_of says so already
    assert repeats.check("s3", fresh) is None
    loose = Digests({"a": "1" * 64, "b": "5" * 64}, {"a": "x", "b": "x"})
    found = repeats.check("s4", loose)
    assert found.tensors == {"a": "s1"} and found.shards == {}  # one tensor, not a whole shard
    assert found.describe() == "tensors a repeat s1"
