"""Trajectories over checkpoints: one table in token order, cached per weights hash."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import ihprobe
from ihprobe.cli import main
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.provenance import COLUMNS
from tests.helpers import run_checkpoint, save_checkpoint, tiny_hf_model

SCAN = {"n": 8, "batch": 4, "seed": 3}
METRICS = ["prefix_matching", "ar_accuracy"]


@pytest.fixture()
def run(tmp_path, tokenizer):
    run = tmp_path / "run"
    for step, seed in ((0, 0), (40, 2), (10, 1)):
        run_checkpoint(run, step, seed, tokenizer)
    return run


def test_table_is_ordered_and_matches_direct_scans(run, tmp_path, counted):
    table = ihprobe.trajectory(run, METRICS, cache=tmp_path / "cache", **SCAN)
    assert list(table.columns) == [*COLUMNS, "duplicate_of", "repeats"]
    assert table["step"].unique().tolist() == [0, 10, 40]
    assert table["tokens"].is_monotonic_increasing
    assert set(table["model"]) == {"tiny-run"} and table["duplicate_of"].isna().all()
    # fresh models of three seeds share their zero biases and unit norms, and the column says so
    said = table.groupby("step")["repeats"].first()
    assert pd.isna(said[0]) and said[10].endswith("repeat " + str(run / "checkpoints/step-000000"))
    assert len(table) == 3 * (2 * 4 + 1)  # 2 layers x 4 heads of PS, one AR accuracy
    # the values are what scanning each checkpoint on its own gives
    direct = ihprobe.scan(ihprobe.load(run / "checkpoints" / "step-000010"), METRICS, **SCAN)
    mine = table[table.step == 10].set_index(["metric", "layer", "head"])["value"]
    ref = direct.to_frame().set_index(["metric", "layer", "head"])["value"]
    pd.testing.assert_series_equal(mine.sort_index(), ref.sort_index(), check_exact=False)


def test_cache_scans_only_new_checkpoints_and_flags_duplicates(run, tmp_path, counted, tokenizer):
    cache = tmp_path / "cache"
    first = ihprobe.trajectory(run, METRICS, cache=cache, **SCAN)
    assert sorted(counted) == [0, 10, 40]
    run_checkpoint(run, 80, 3, tokenizer)  # training went on
    shutil.copytree(run / "checkpoints" / "step-000010", run / "checkpoints" / "step-000020")
    meta = run / "checkpoints" / "step-000020" / "ihprobe.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "step": 20, "tokens": 1280}))
    counted.clear()
    second = ihprobe.trajectory(run, METRICS, cache=cache, **SCAN)
    assert counted == [80]  # step 20 has step 10's weights: served from the cache
    assert second["step"].unique().tolist() == [0, 10, 20, 40, 80]
    flagged = second.groupby("step")["duplicate_of"].first()
    assert flagged[20].endswith("step-000010") and flagged.drop(20).isna().all()
    same = second[second.step.isin([0, 10, 40])].drop(columns="duplicate_of")
    pd.testing.assert_frame_equal(
        same.reset_index(drop=True), first.drop(columns="duplicate_of").reset_index(drop=True)
    )
    counted.clear()
    ihprobe.trajectory(run, METRICS, cache=cache, **{**SCAN, "seed": 4})  # other settings
    assert sorted(counted) == [0, 10, 40, 80]


def test_cache_location_from_environment(run, tmp_path, monkeypatch, counted):
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "env-cache"))
    ihprobe.trajectory(run, ["prefix_matching"], **SCAN)
    assert len(list((tmp_path / "env-cache" / "scans").glob("*.json"))) == 3
    counted.clear()
    shutil.copytree(run / "checkpoints" / "step-000010", run / "checkpoints" / "step-000020")
    ihprobe.trajectory(run, ["prefix_matching"], cache=False, **SCAN)
    assert sorted(counted) == [0, 10, 40]  # without a cache a duplicate is still scanned once


def test_a_folder_of_hf_trainer_checkpoints_is_one_run(tmp_path, capsys):
    """``checkpoint-N`` folders without ihprobe's metadata (as HF Trainer saves them) are one
    series named by their folder, so ``ihprobe emergence`` fits them instead of refusing a
    table that "mixes runs"."""
    folder = tmp_path / "hf-run"
    for step in range(0, 800, 100):
        hf = tiny_hf_model("gpt-neox", vocab_size=64, d_model=32, context=64, seed=step)
        save_checkpoint(hf, folder / f"checkpoint-{step}", id_tokenizer(64))
    table = ihprobe.trajectory(folder, ["prefix_matching"], batch=4, cache=False, progress=False)
    assert set(table.model) == {str(folder)} and table.step.tolist()[::8] == list(
        range(0, 800, 100)
    )
    assert main(["emergence", str(folder), "--batch", "4", "--no-cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["model"] == str(folder)
