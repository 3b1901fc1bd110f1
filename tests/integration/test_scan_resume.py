"""A scanned series is recorded checkpoint by checkpoint in the results cache (issue 59, item 6):
an interrupted ``--keep none`` series resumes offline from the next checkpoint, a finished one
reruns offline with the same output, and a changed setting scans again.

The HF cache is laid out by hand (:mod:`tests.hub_layout`) and used offline: three revisions of
``org/tiny``, each an ihprobe checkpoint with its ``ihprobe.json`` (step, tokens, run); step200
and step300 hold the same weights under different steps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from ihprobe.cli import main
from ihprobe.dynamics import trajectories
from ihprobe.io import hub_cache
from ihprobe.jobs.scan import scan_job
from ihprobe.series import checkpoint_rows
from tests.helpers import run_checkpoint
from tests.hub_layout import lay_out, use_offline

REPO = "org/tiny"
REVISIONS = ["step100", "step200", "step300"]
PROBE = {"metrics": ["prefix_matching", "ar_accuracy"], "n": 8, "batch": 4}
FLAGS = ["--metrics", "prefix_matching,ar_accuracy", "--n", "8", "--batch", "4"]


@pytest.fixture
def hub(tmp_path, tokenizer, monkeypatch) -> Path:
    """The offline HF cache holding the three revisions; every revision counts as this
    series' download (the hub is offline here), so ``keep="none"`` removes it once scanned."""
    saved = {
        revision: run_checkpoint(tmp_path / "made", step, seed, tokenizer)
        for revision, step, seed in (("step100", 100, 0), ("step200", 200, 1), ("step300", 300, 1))
    }
    lay_out(tmp_path / "hub", REPO, saved, move=True)
    monkeypatch.setattr(hub_cache, "cached_snapshot", lambda repo_id, revision: None)
    return use_offline(tmp_path / "hub", tmp_path, monkeypatch)


@pytest.fixture
def scanned(monkeypatch) -> list[int]:
    """The scans run (one entry per call), counted where the series calls them."""
    calls, real = [], trajectories.scan
    monkeypatch.setattr(trajectories, "scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def revisions_left(hub: Path) -> set[str]:
    refs = hub / "models--org--tiny" / "refs"
    return {p.name for p in refs.iterdir()} if refs.is_dir() else set()


def scan_cli(out: Path, *extra: str) -> int:
    revisions = [flag for r in REVISIONS for flag in ("--revision", r)]
    return main(["scan", REPO, *revisions, *FLAGS, "--out", str(out), *extra])


class Interrupted(Exception):
    """Stands for a kill in the middle of a checkpoint."""


def test_an_interrupted_series_resumes_offline_from_the_next_checkpoint(
    hub, tmp_path, monkeypatch, cache_dir
):
    reference = scan_job([REPO], tmp_path / "ref", revisions=REVISIONS, cache=False, **PROBE)
    real = trajectories.scan
    calls = []

    def dies_on_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise Interrupted
        return real(*args, **kwargs)

    monkeypatch.setattr(trajectories, "scan", dies_on_the_second)
    with pytest.raises(Interrupted):
        scan_job([REPO], tmp_path / "first", revisions=REVISIONS, keep="none", **PROBE)
    assert revisions_left(hub) == {"step200", "step300"}  # step100 was scanned and removed
    assert not (tmp_path / "first" / "scores.csv").exists()

    monkeypatch.setattr(trajectories, "scan", real)
    seen, fetch = [], checkpoint_rows.fetched
    monkeypatch.setattr(
        checkpoint_rows,
        "fetched",
        lambda source, revision=None: seen.append(revision) or fetch(source, revision),
    )
    again = scan_job([REPO], tmp_path / "again", revisions=REVISIONS, keep="none", **PROBE)
    assert "step100" not in seen  # its scores came from the results cache, unread
    assert revisions_left(hub) == set()
    pd.testing.assert_frame_equal(again.table, reference.table, check_exact=False, rtol=1e-6)
    assert again.table.drop_duplicates("revision")["tokens"].tolist() == [6400, 12800, 19200]
    assert again.table.groupby("revision")["duplicate_of"].first()["step300"] == f"{REPO}@step200"


def test_a_finished_keep_none_series_reruns_offline_with_the_same_output(
    hub, tmp_path, capsys, cache_dir, scanned
):
    assert scan_cli(tmp_path / "first", "--keep", "none") == 0
    first = capsys.readouterr().out
    assert revisions_left(hub) == set() and len(scanned) == 2  # step300 repeats step200
    assert scan_cli(tmp_path / "again", "--keep", "none") == 0
    again = capsys.readouterr().out
    assert len(scanned) == 2  # nothing scanned again
    assert again.replace("again", "first") == first
    csv = [(tmp_path / out / "scores.csv").read_bytes() for out in ("first", "again")]
    assert csv[0] == csv[1]
    html = [(tmp_path / out / "heatmaps.html").read_text() for out in ("first", "again")]
    assert [UUID.sub("ID", page) for page in html[1:]] == [UUID.sub("ID", html[0])]


UUID = re.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # plotly div ids


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(["--metrics", "prefix_matching,copying"], id="metrics"),
        # the other settings go the same way (seconds each)
        pytest.param(["--n", "6"], id="n", marks=pytest.mark.slow),
        pytest.param(["--seed", "1"], id="seed", marks=pytest.mark.slow),
        pytest.param(["--dtype", "bfloat16"], id="dtype", marks=pytest.mark.slow),
    ],
)
def test_a_changed_setting_scans_again(hub, tmp_path, capsys, cache_dir, scanned, changed):
    assert scan_cli(tmp_path / "first") == 0  # keep all: the revisions stay
    assert len(scanned) == 2
    assert scan_cli(tmp_path / "same") == 0
    assert len(scanned) == 2
    assert scan_cli(tmp_path / "changed", *changed) == 0
    assert len(scanned) == 4  # step100 and step200 scanned again (step300 repeats step200)
    table = pd.read_csv(tmp_path / "changed" / "scores.csv")
    if changed[0] == "--metrics":
        assert set(table["metric"]) == {"prefix_matching", "copying"}


def test_a_changed_setting_after_keep_none_is_refused_offline(hub, tmp_path, capsys, cache_dir):
    assert scan_cli(tmp_path / "first", "--keep", "none") == 0
    capsys.readouterr()
    # the weights are gone and the recorded scores are of other settings: never reused
    assert scan_cli(tmp_path / "changed", "--keep", "none", "--seed", "1") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not in the local HF cache" in err
