"""The results cache keys what changes the numbers (issue: cache provenance): fv's built-in
task set by its content (WordNet's two tasks or not), ``ablation_trajectory``'s task files by
their pairs (not their paths), and each checkpoint by its config beside its weights."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from ihprobe.causal import fv, word_tasks
from ihprobe.causal.tasks import builtin_tasks, task_digest
from ihprobe.dynamics import ablation_series, trajectories
from ihprobe.io.hub_cache import RevisionIndex
from ihprobe.io.runs import Checkpoint
from ihprobe.series import checkpoint_rows
from tests.helpers import save_checkpoint, tiny_hf_model

WORDNET_PAIRS = {"antonym": [("hot", "cold"), ("big", "small")], "synonym": [("big", "large")]}
PROBE = {"n": 8, "batch": 2}


def test_no_tasks_are_keyed_by_the_built_in_set_installing_wordnet_changes(tmp_path, monkeypatch):
    made = []
    real = word_tasks.word_tasks
    monkeypatch.setattr(word_tasks, "word_tasks", lambda **k: made.append(1) or real(**k))
    monkeypatch.setattr(word_tasks, "WORDNET", tmp_path / "absent")
    begin = time.perf_counter()
    _, absent = trajectories.read_tasks_once({"tasks": None, "seed": 3})
    first = time.perf_counter() - begin
    tasks = builtin_tasks(seed=3) + real(seed=3, wordnet=tmp_path / "absent")
    digests = "\n".join(task_digest(t) for t in tasks)
    assert absent["tasks"] == hashlib.sha256(digests.encode()).hexdigest()
    trajectories.read_tasks_once({"tasks": None, "seed": 3})  # once per process
    assert len(made) == 1 and first < 30

    installed = tmp_path / "installed"
    monkeypatch.setattr(word_tasks, "WORDNET", installed)
    monkeypatch.setattr(word_tasks, "wordnet_pairs", lambda root: dict(WORDNET_PAIRS))
    _, now = trajectories.read_tasks_once({"tasks": None, "seed": 3})
    names = [t.name for t in word_tasks.default_tasks(seed=3, wordnet=installed)]
    assert "antonym" in names and now["tasks"] != absent["tasks"]  # a new entry, not stale rows
    ran = "\n".join(task_digest(t) for t in fv._tasks(None, 3))  # what fv runs is what is keyed
    assert now["tasks"] == hashlib.sha256(ran.encode()).hexdigest()
    assert trajectories.read_tasks_once({"seed": 3}, builtin=False)[1] == {"seed": 3}


def test_ablation_trajectory_keys_task_files_by_their_pairs(tmp_path, monkeypatch):
    source = save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "ckpt")
    seen = []

    def cached_map(found, fn, folder, settings, **options):  # the key, and what ablate gets
        seen.append((settings, fn))
        return pd.DataFrame()

    monkeypatch.setattr(ablation_series, "cached_map", cached_map)
    files = [tmp_path / "a" / "t.tsv", tmp_path / "b" / "t.tsv", tmp_path / "c" / "t.tsv"]
    texts = ["hot\tcold\nup\tdown\n"] * 2 + ["hot\tcold\nup\tover\n"]  # moved, then edited
    for file, pairs in zip(files, texts, strict=True):
        file.parent.mkdir()
        file.write_text(pairs)
    for file in files:
        ablation_series.ablation_trajectory(str(source), tasks=[str(file)], progress=False)
    keys = [settings for settings, _ in seen]
    assert keys[0] == keys[1] != keys[2]  # moved: the same entry; edited: a new one
    files[0].write_text("edited\tafter the key\n")  # read once: the key's pairs are ablated
    ablated = []
    monkeypatch.setattr(ablation_series, "ablate", lambda model, **k: ablated.append(k) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        seen[0][1](None)
    assert ablated[0]["tasks"][0].pairs == (("hot", "cold"), ("up", "down"))


@pytest.fixture
def same_weights(tmp_path) -> list[Path]:
    """One checkpoint's tensors under two configs: the second's layer-norm eps is 0.5."""
    first = save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "first")
    second = Path(shutil.copytree(first, tmp_path / "second"))
    config = json.loads((second / "config.json").read_text())
    (second / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 0.5}))
    return [first, second]


def test_the_same_tensors_under_another_config_are_another_entry(same_weights, tmp_path, counted):
    ckpts = [Checkpoint(str(path)) for path in same_weights]
    table = trajectories.trajectory(
        ckpts, ["prefix_matching"], cache=tmp_path / "results", progress=False, **PROBE
    )
    assert len(counted) == 2  # the second is scanned, not served from the first's entry
    alone = trajectories.trajectory(ckpts[1:], ["prefix_matching"], cache=False, **PROBE)
    second = table[table["model"] == str(same_weights[1])].reset_index(drop=True)
    pd.testing.assert_series_equal(second["value"], alone["value"])
    first = table[table["model"] == str(same_weights[0])]["value"].to_numpy()
    assert abs(first - second["value"].to_numpy()).max() > 1e-4  # the config changes numbers
    assert second["duplicate_of"].iloc[0] == str(same_weights[0])  # identical weights still


def test_entries_cached_before_the_config_was_keyed_are_not_found(
    same_weights, tmp_path, counted, monkeypatch
):
    ckpts = [Checkpoint(str(same_weights[0]))]
    where = {"cache": tmp_path / "results", "progress": False, **PROBE}
    with monkeypatch.context() as old:  # entries named by the weights hash alone, as before
        old.setattr(checkpoint_rows.Fetched, "key", property(lambda self: self.digest))
        before = trajectories.trajectory(ckpts, ["prefix_matching"], **where)
    again = trajectories.trajectory(ckpts, ["prefix_matching"], **where)
    assert len(counted) == 2  # scanned again, no crash
    pd.testing.assert_frame_equal(before, again)
    trajectories.trajectory(ckpts, ["prefix_matching"], **where)
    assert len(counted) == 2  # the new entry is found


def test_a_revision_index_entry_without_a_config_is_read_and_refetched(tmp_path):
    RevisionIndex(tmp_path, "org/m").record("step2", "a" * 64, {"step": 2})  # an older entry
    index = RevisionIndex(tmp_path, "org/m")
    assert index.get("step2") == "a" * 64 and index.config("step2") is None
    index.record("step2", "a" * 64, {"step": 2}, "b" * 64)
    assert RevisionIndex(tmp_path, "org/m").config("step2") == "b" * 64
