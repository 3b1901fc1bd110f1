"""Progress that talks (issue 47): long API calls report each checkpoint with the time left
through ``logging`` (what the CLI's stage lines show off a terminal); the first stage line comes
within a few seconds; a metric scanned once is reused by any later request that names it, so
``emergence`` after the demo rescans nothing."""

from __future__ import annotations

import logging
import time

import pytest

import ihprobe
from ihprobe.cli import _stages
from ihprobe.core.stages import STAGE, Counter
from tests.helpers import fake_run

SCAN = {"n": 8, "batch": 4, "seed": 3}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return fake_run(tmp_path_factory.mktemp("progress") / "run", [0, 100, 200])


def test_the_time_left_is_the_mean_time_so_far_times_the_items_left(monkeypatch):
    clock = iter([0.0, 10.0, 30.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    counter = Counter(logging.getLogger("ihprobe.test"), "scans", total=5)  # starts at 0 s
    assert counter.message(1, "a") == "scans 1/5: a"  # nothing measured yet: no estimate
    assert counter.message(2, "b") == "scans 2/5: b, about 40 s left"  # 10 s each, 4 to go
    assert counter.message(3, "c") == "scans 3/5: c, about 45 s left"  # 15 s each, 3 to go


def test_trajectory_reports_each_checkpoint_through_logging(run, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ihprobe")
    ihprobe.trajectory(run, ["prefix_matching"], cache=tmp_path, progress=False, **SCAN)
    said = [r.getMessage() for r in caplog.records if getattr(r, "stage", False)]
    assert [m.split(":")[0] for m in said] == ["scans 1/3", "scans 2/3", "scans 3/3"]
    assert "s left" in said[-1]


def test_a_metric_scanned_once_is_reused_by_any_later_request(run, tmp_path, monkeypatch):
    from ihprobe.dynamics import trajectories

    first = ihprobe.trajectory(
        run, ["prefix_matching", "ar_accuracy"], cache=tmp_path, progress=False, **SCAN
    )
    scanned = []
    real = trajectories.scan
    monkeypatch.setattr(trajectories, "scan", lambda *a, **k: scanned.append(a) or real(*a, **k))
    again = ihprobe.trajectory(
        run, ["ar_accuracy"], cache=tmp_path, progress=False, batch=4, n=8, seed=3, chunk=25
    )  # the same settings, spelled out
    assert scanned == []  # every checkpoint from the cache
    expected = first[first.metric == "ar_accuracy"].reset_index(drop=True)
    assert again["value"].tolist() == expected["value"].tolist()
    ihprobe.trajectory(
        run, ["ar_accuracy", "previous_token"], cache=tmp_path, progress=False, **SCAN
    )
    assert [a[1] for a in scanned] == [["previous_token"]] * 3  # only the missing metric


def test_the_first_stage_line_comes_within_seconds(monkeypatch, capsys):
    monkeypatch.setattr(_stages, "FIRST_S", 0.05)
    monkeypatch.setattr(_stages, "EVERY_S", 60.0)
    with _stages.stage_lines("scan", enabled=True):
        logging.getLogger("ihprobe.test").info("scans 1/21: step-000000", extra=STAGE)
        time.sleep(0.5)
    err = capsys.readouterr().err
    assert "ihprobe scan: 0 s, scans 1/21: step-000000" in err
