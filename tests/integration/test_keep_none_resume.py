"""``--keep none`` after a killed series: the revision the series was fetching when it was
killed is its own download, so the resumed series removes it once scanned; a revision that an
earlier, finished call downloaded stays. The HF cache is laid out by hand and used offline; a
fetch lays the revision out (the download) the first time it is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from ihprobe.dynamics import trajectories
from ihprobe.io import hub_cache
from tests.helpers import run_checkpoint
from tests.hub_layout import lay_out, use_offline

REPO = "org/tiny"
REVISIONS = ["step100", "step200"]
PROBE = {"n": 8, "batch": 4, "progress": False}


class Killed(BaseException):
    """Stands for a kill between the fetch and the scan."""


@pytest.fixture
def hub(tmp_path, tokenizer, monkeypatch) -> Path:
    """An empty offline HF cache whose fetches lay each revision out when first asked for."""
    remote = {
        revision: run_checkpoint(tmp_path / "remote", step, step, tokenizer)
        for revision, step in (("step100", 100), ("step200", 200))
    }
    hub = use_offline(tmp_path / "hub", tmp_path, monkeypatch)
    real = hub_cache.resolve

    def download(source, revision=None, **kwargs):
        if hub_cache.cached_snapshot(REPO, revision) is None:
            lay_out(hub, REPO, {revision: remote[revision]})
        return real(source, revision=revision, **kwargs)

    monkeypatch.setattr(hub_cache, "resolve", download)
    return hub


def revisions_left(hub: Path) -> set[str]:
    refs = hub / "models--org--tiny" / "refs"
    return {p.name for p in refs.iterdir()} if refs.is_dir() else set()


def test_a_revision_fetched_when_the_series_was_killed_is_removed_on_resume(
    hub, tmp_path, monkeypatch, cache_dir
):
    real = trajectories.scan

    def killed(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(trajectories, "scan", killed)
    where = {"revisions": REVISIONS, "keep": "none", "cache": tmp_path / "results", **PROBE}
    with pytest.raises(Killed):
        trajectories.trajectory(REPO, ["prefix_matching"], **where)
    assert "step100" in revisions_left(hub)  # fetched, never scanned
    monkeypatch.setattr(trajectories, "scan", real)
    table = trajectories.trajectory(REPO, ["prefix_matching"], **where)
    assert table["revision"].unique().tolist() == REVISIONS
    assert revisions_left(hub) == set()  # the killed fetch was this series' own: removed


def test_a_finished_earlier_download_stays_under_keep_none(hub, tmp_path, cache_dir):
    where = {"revisions": REVISIONS, "cache": tmp_path / "results", **PROBE}
    trajectories.trajectory(REPO, ["prefix_matching"], keep="all", **where)
    assert revisions_left(hub) == set(REVISIONS)
    trajectories.trajectory(REPO, ["copying"], keep="none", **where)
    assert revisions_left(hub) == set(REVISIONS)  # an earlier call's download: kept


def test_a_revision_scanned_but_not_yet_removed_when_killed_is_removed_on_resume(
    hub, tmp_path, monkeypatch, cache_dir
):
    from ihprobe.series import checkpoint_rows

    real, drops = checkpoint_rows.drop_revision, []

    def killed(path):  # the scan's entry is written; the kill comes before the removal
        drops.append(path)
        raise Killed

    monkeypatch.setattr(checkpoint_rows, "drop_revision", killed)
    where = {"revisions": REVISIONS, "keep": "none", "cache": tmp_path / "results", **PROBE}
    with pytest.raises(Killed):
        trajectories.trajectory(REPO, ["prefix_matching"], **where)
    assert len(drops) == 1 and "step100" in revisions_left(hub)
    monkeypatch.setattr(checkpoint_rows, "drop_revision", real)
    trajectories.trajectory(REPO, ["prefix_matching"], **where)
    assert revisions_left(hub) == set()
