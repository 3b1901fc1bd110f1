"""``fv`` in the series results cache (issue 61): task files are keyed by their content, not
their path, and a checkpoint that does no task above chance is cached with its tasks' clean
accuracies, so a rerun reads it instead of computing it again. Known answers come from the
hand-written model of ``tests/planted_fv.py``: its FV head writes ``fv_scale``, and without it
the decoy answer wins (no task above chance)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ihprobe
from ihprobe.causal.tasks import Task
from ihprobe.dynamics.trajectories import FV_ACCURACY, scan_checkpoints
from ihprobe.io.sources import sources_of
from ihprobe.probes import provided
from tests.planted_fv import FV_HEAD, PAIRS, save_planted

TASK = Task("planted", PAIRS)


@pytest.fixture
def fv_calls(monkeypatch):
    """Every call of scan's fv provider, by the checkpoint's step where it has one."""
    ihprobe.scan  # resolves the public name, which registers fv's provider  # noqa: B018
    calls = []
    real = provided.PROVIDERS["fv"]

    def counted(model, options):
        calls.append(options)
        return real(model, options)

    monkeypatch.setitem(provided.PROVIDERS, "fv", counted)
    return calls


def fv_values(table):
    rows = table[table.metric == "fv"].sort_values(["layer", "head"])
    return rows.value.to_numpy()


def test_an_edited_task_file_is_scored_again_not_read_from_the_cache(tmp_path, fv_calls):
    ckpt = save_planted(tmp_path / "planted", decoy=2.0)
    task = tmp_path / "planted.tsv"
    task.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS))
    cache = tmp_path / "cache"
    first = ihprobe.trajectory(ckpt, ["fv"], tasks=[task], cache=cache, progress=False)
    again = ihprobe.trajectory(ckpt, ["fv"], tasks=[task], cache=cache, progress=False)
    assert len(fv_calls) == 1 and (fv_values(again) == fv_values(first)).all()  # cached

    task.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS[:5]))  # the same path, new pairs
    edited = ihprobe.trajectory(ckpt, ["fv"], tasks=[task], cache=cache, progress=False)
    assert len(fv_calls) == 2  # scored again
    fresh = ihprobe.fv_scores(ihprobe.load(ckpt), [task]).scores.flatten().double().numpy()
    assert fv_values(edited) == pytest.approx(fresh, abs=1e-6)  # the edited pairs' numbers
    assert abs(fv_values(edited) - fv_values(first)).max() > 1e-4  # not the stale ones
    by_task = ihprobe.trajectory(ckpt, ["fv"], tasks=[TASK], cache=cache, progress=False)
    assert len(fv_calls) == 2  # the same name and pairs given as a Task: the first entry
    assert (fv_values(by_task) == fv_values(first)).all()


def planted_run(root, scales):
    """A run folder of planted checkpoints, one per FV-head strength in ``scales``; at 0 the
    decoy answer wins and no task is done above chance."""
    for step, scale in enumerate(scales):
        folder = root / "checkpoints" / f"step-{step:06d}"
        save_planted(folder, fv_scale=scale)
        meta = {"step": step, "tokens": step * 1000, "run": "planted"}
        (folder / "ihprobe.json").write_text(json.dumps(meta))
    return root


def test_no_task_above_chance_is_cached_with_the_accuracies(tmp_path, fv_calls):
    run = planted_run(tmp_path / "run", (0.0, 1.0))
    cache = tmp_path / "cache"
    first = ihprobe.trajectory(run, ["fv"], tasks=[TASK], cache=cache, progress=False)
    assert len(fv_calls) == 2
    accuracy = first[first.metric == f"{FV_ACCURACY}planted"].set_index("step").value
    assert accuracy[0] == 0.0 and accuracy[1] == 1.0  # the decoy wins without the FV head
    assert set(first[first.metric == "fv"].step) == {1}  # no fv rows where no task is done
    top = first[first.metric == "fv"].sort_values("value").iloc[-1]
    assert (int(top.layer), int(top["head"])) == FV_HEAD

    again = ihprobe.trajectory(run, ["fv"], tasks=[TASK], cache=cache, progress=False)
    assert len(fv_calls) == 2  # both checkpoints read from the cache, the skipped one too
    columns = ["step", "layer", "head", "metric", "value"]
    pd.testing.assert_frame_equal(again[columns], first[columns], check_dtype=False)

    ckpts = sources_of(run)
    scanned = scan_checkpoints(ckpts, ["fv"], tasks=[TASK], cache=cache)
    rescanned = scan_checkpoints(ckpts, ["fv"], tasks=[TASK], cache=cache)
    assert len(fv_calls) == 4  # the scan series: once each, then from its cache
    for before, after in zip(scanned, rescanned, strict=True):
        assert after[0].settings["notes"] == before[0].settings["notes"]
    (note,) = rescanned[0][0].settings["notes"]
    assert note.startswith("fv skipped: no task is done above chance") and not rescanned[0][0].head
    assert rescanned[1][0].top_heads("fv", 1)[0][:2] == FV_HEAD
    assert rescanned[0][0].chance("fv") == 0.0  # an fv-only scan records no n
