"""The one cache: entries are checked when read (checksum, schema, finite values, shape), and an
entry that fails, however it was edited, is removed and computed again."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import ihprobe
from ihprobe.core import cache
from ihprobe.data import make_producer
from ihprobe.data import markov as markov_module
from ihprobe.dynamics.llc import _checked_result
from ihprobe.io.hub_cache import RevisionIndex
from ihprobe.series.entries import checked_rows
from tests.helpers import run_checkpoint

GOOD = [[0, 0, "m", 0.5], [0, 1, "m", 0.25], [1, 0, "m", 0.0], [1, 1, "m", 1.0]]
GOOD_MODEL_ROW = [None, None, "loss", 2.0]
# an edit that parses as JSON and keeps the checksum right: only the checks can catch it
EDITS = {
    "NaN value": lambda rows: _set(rows, 1, 3, float("nan")),
    "inf value": lambda rows: _set(rows, 2, 3, float("inf")),
    "-inf value": lambda rows: _set(rows, 0, 3, float("-inf")),
    "value as a string": lambda rows: _set(rows, 0, 3, "0.5"),
    "value as a bool": lambda rows: _set(rows, 0, 3, True),
    "metric as a number": lambda rows: _set(rows, 0, 2, 7),
    "negative layer": lambda rows: _set(rows, 0, 0, -1),
    "layer as a float": lambda rows: _set(rows, 0, 0, 0.0),
    "layer without head": lambda rows: _set(rows, 0, 1, None),
    "a head missing": lambda rows: rows[:3] + rows[4:],  # head (1, 1) of every metric
    "a row repeated": lambda rows: rows + rows[:1],
    "a short row": lambda rows: [rows[0][:3]] + rows[1:],
    "no rows": lambda rows: [],
    "rows in a dict": lambda rows: {"rows": rows},
    "grids differ by metric": lambda rows: rows + [[0, 0, "other", 1.0]],
}


def _set(rows, i, j, value):
    rows = json.loads(json.dumps(rows))
    rows[i][j] = value
    return rows


def test_good_rows_pass_with_their_values():
    frame = checked_rows(GOOD + [GOOD_MODEL_ROW])
    assert frame["value"].tolist() == [0.5, 0.25, 0.0, 1.0, 2.0]
    assert frame["layer"].isna().tolist() == [False] * 4 + [True]


@pytest.mark.parametrize("edit", EDITS)
def test_edited_rows_are_rejected(edit):
    with pytest.raises(ValueError):
        checked_rows(EDITS[edit](GOOD + [GOOD_MODEL_ROW]))


def test_non_finite_values_pass_only_where_allowed():
    rows = _set(GOOD, 1, 3, float("nan"))
    assert np.isnan(checked_rows(rows, finite=False)["value"][1])


def test_read_returns_what_write_stored(tmp_path):
    file = tmp_path / "a" / "entry.json"
    cache.write(file, {"x": [1, 2.5, None, "s"]})
    assert cache.read(file, dict) == {"x": [1, 2.5, None, "s"]}


@pytest.mark.parametrize(
    "damage",
    ["a value changed", "checksum removed", "random bytes", "empty", "a list", "check fails"],
)
def test_a_bad_entry_is_removed_and_reported(tmp_path, caplog, damage):
    file = tmp_path / "entry.json"
    cache.write(file, GOOD)
    stored = json.loads(file.read_text())
    if damage == "a value changed":  # plausible, finite, well-formed: only the checksum knows
        stored["value"][0][3] = 0.75
        file.write_text(json.dumps(stored))
    elif damage == "checksum removed":
        file.write_text(json.dumps({"value": stored["value"]}))
    elif damage == "random bytes":
        file.write_bytes(bytes(range(256)))
    elif damage == "empty":
        file.write_text("")
    elif damage == "a list":
        file.write_text("[1, 2]")
    check = (lambda v: checked_rows(v, finite=True)) if damage != "check fails" else _reject
    with caplog.at_level(logging.WARNING, logger="ihprobe.core.cache"):
        assert cache.read(file, check) is None
    assert not file.exists()
    assert any("bad cache entry" in r.getMessage() for r in caplog.records)


def _reject(value):
    raise ValueError("not what this reader expects")


def test_missing_entry_or_no_cache_reads_as_none(tmp_path):
    assert cache.read(tmp_path / "absent.json", dict) is None
    assert cache.read(None, dict) is None
    assert cache.root(False) is None and cache.root(tmp_path) == tmp_path


def test_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "env"))
    assert cache.root() == tmp_path / "env"


# ----------------------------------------------------------------------------- scans over a run


@pytest.fixture()
def run(tmp_path, tokenizer):
    run = tmp_path / "run"
    for step, seed in ((0, 0), (10, 1)):
        run_checkpoint(run, step, seed, tokenizer)
    return run


SCAN = {"n": 8, "batch": 4, "seed": 3}


@pytest.mark.parametrize("edit", ["NaN value", "value as a string", "a head missing"])
def test_an_edited_scan_entry_is_scanned_again(run, tmp_path, counted, edit):
    where = tmp_path / "cache"
    first = ihprobe.trajectory(run, ["prefix_matching"], cache=where, **SCAN)
    assert sorted(counted) == [0, 10]
    entries = sorted((where / "scans").iterdir())
    stored = json.loads(entries[0].read_text())
    cache.write(entries[0], EDITS[edit](stored["value"]))  # checksum recomputed over the edit
    again = ihprobe.trajectory(run, ["prefix_matching"], cache=where, **SCAN)
    assert len(counted) == 3  # the edited checkpoint alone was scanned again
    assert again["value"].tolist() == first["value"].tolist()
    fresh = json.loads(entries[0].read_text())["value"]
    assert checked_rows(fresh).shape == (len(fresh), 4)


def test_a_plausible_edit_is_caught_by_the_checksum(run, tmp_path, counted):
    where = tmp_path / "cache"
    first = ihprobe.trajectory(run, ["prefix_matching"], cache=where, **SCAN)
    for entry in (where / "scans").iterdir():
        stored = json.loads(entry.read_text())
        stored["value"][0][3] = 0.123  # a finite, in-range number
        entry.write_text(json.dumps(stored))
    again = ihprobe.trajectory(run, ["prefix_matching"], cache=where, **SCAN)
    assert len(counted) == 4 and again["value"].tolist() == first["value"].tolist()
    assert 0.123 not in again["value"].tolist()


# ----------------------------------------------------------------------------- other entries


def test_an_edited_markov_matrix_is_fitted_again(tmp_path, monkeypatch):
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path))
    options = dict(batch_size=8, context=16, vocab_size=16, fit_steps=20)
    original = make_producer("markov", **options).transition
    (entry,) = (tmp_path / "markov").iterdir()
    fits = []
    real = markov_module.fit_transition
    monkeypatch.setattr(
        markov_module, "fit_transition", lambda *a, **k: fits.append(1) or real(*a, **k)
    )
    for damage in (np.nan, np.inf, -0.5, "shape"):
        t = original.numpy().copy()
        if damage == "shape":
            t = t[:-1]
        else:
            t[2, 3] = damage
        np.save(entry / "transition.npy", t)
        again = make_producer("markov", **options).transition
        assert np.array_equal(again.numpy(), original.numpy())
    assert len(fits) == 4  # each damaged matrix was fitted again, none was served


@pytest.mark.parametrize(
    "damage",
    [
        {"llc_chains": [1.0, float("nan")]},
        {"init_loss": float("inf")},
        {"init_loss": "3.2"},
        {"trace": [[1.0, 2.0], [1.0]]},
        {"trace": [[1.0, 2.0]]},  # one trace for two chains
        {"llc_chains": []},
    ],
)
def test_llc_entries_are_checked(damage):
    good = {"llc_chains": [1.0, 2.0], "init_loss": 3.2, "trace": [[1.0, 2.0], [1.5, 2.5]]}
    assert _checked_result(good) == good
    with pytest.raises(ValueError):
        _checked_result({**good, **damage})


def test_a_revision_index_with_a_bad_hash_is_dropped(tmp_path):
    index = RevisionIndex(tmp_path, "org/model")
    index.record("step1", "a" * 64)
    assert RevisionIndex(tmp_path, "org/model").get("step1") == "a" * 64
    cache.write(index.file, {"step1": "../../elsewhere"})
    assert RevisionIndex(tmp_path, "org/model").get("step1") is None


def test_a_revision_index_keeps_what_the_checkpoint_said_and_drops_a_bad_entry(tmp_path):
    said = {"step": 1, "tokens": 64, "run": "r", "sha256": {"config.json": "b" * 64}}
    RevisionIndex(tmp_path, "org/model").record("step1", "a" * 64, said)
    index = RevisionIndex(tmp_path, "org/model")
    assert index.meta("step1") == {"step": 1, "tokens": 64, "run": "r"}  # provenance only
    assert index.meta("step2") == {}
    for meta in ({"step": -1}, {"tokens": "64"}, {"run": 3}, {"step": True}, {"other": 1}):
        cache.write(index.file, {"step1": {"sha256": "a" * 64, "meta": meta}})
        assert RevisionIndex(tmp_path, "org/model").get("step1") is None, meta
