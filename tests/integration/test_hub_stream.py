"""Hub checkpoint series streamed through an HF cache that the test lays out, offline.

The cache has the hub's layout: ``models--org--tiny/blobs/<sha256>``, ``snapshots/<commit>/``
with symlinks into the blobs, and ``refs/step100`` files holding the commit. Three revisions:
step100 and step200 hold different weights, step300 the same weights as step200 (another
commit, same blob), as Pythia's duplicated branches do.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd
import pytest

from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.trajectories import trajectory
from tests.helpers import save_checkpoint, tiny_hf_model
from tests.hub_layout import use_offline

REPO = "org/tiny"
METRICS = ["prefix_matching", "ar_accuracy"]
SCAN = {"n": 8, "batch": 4}


def lay_out_hub_cache(hub: Path, tokenizer) -> None:
    """Three revisions of a tiny GPT-NeoX in the hub cache layout; step300 repeats step200."""
    repo = hub / "models--org--tiny"
    for revision, seed in (("step100", 0), ("step200", 1), ("step300", 1)):
        saved = save_checkpoint(tiny_hf_model("gpt-neox", seed=seed), repo / "tmp", tokenizer)
        commit = hashlib.sha1(revision.encode()).hexdigest()  # a 40-hex commit hash
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        for file in sorted(saved.iterdir()):
            data = file.read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
            file.unlink()
        saved.rmdir()
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / revision).write_text(commit)


@pytest.fixture
def hub(tmp_path, tokenizer, monkeypatch) -> Path:
    """An offline HF hub cache in ``tmp_path/hub`` holding the three revisions of org/tiny."""
    hub = tmp_path / "hub"
    lay_out_hub_cache(hub, tokenizer)
    return use_offline(hub, tmp_path, monkeypatch)


@pytest.fixture
def downloading(monkeypatch):
    """Every revision counts as fetched now, not found in the cache (the hub is offline here):
    ihprobe records it as its download, which keep="none" may remove."""
    from ihprobe.io import hub_cache

    monkeypatch.setattr(hub_cache, "cached_snapshot", lambda repo_id, revision: None)


def files_in(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file() or p.is_symlink()]


def test_streamed_series_flags_the_duplicate_and_empties_the_cache(hub, tmp_path, downloading):
    revisions = ["step100", "step200", "step300"]
    table = trajectory(
        REPO, METRICS, revisions=revisions, keep="none", cache=tmp_path / "results", **SCAN
    )
    per_revision = table.groupby("revision")["duplicate_of"].first()
    assert per_revision["step300"] == f"{REPO}@step200"
    assert per_revision[["step100", "step200"]].isna().all()
    steps = table.drop_duplicates("revision")["step"].tolist()
    assert steps == [100, 200, 300]
    assert files_in(hub) == []  # keep="none": every revision left the HF cache
    # the duplicate's scores are the scores of the revision it repeats
    pm = table.query("metric == 'prefix_matching'").pivot_table(
        index=["layer", "head"], columns="revision", values="value"
    )
    assert (pm["step300"] == pm["step200"]).all() and (pm["step100"] != pm["step200"]).any()

    # an interrupted series resumes: scanned revisions come from the results cache, unfetched
    again = trajectory(
        REPO, METRICS, revisions=revisions, keep="none", cache=tmp_path / "results", **SCAN
    )
    assert again["value"].tolist() == table["value"].tolist()
    assert again.groupby("revision")["duplicate_of"].first()["step300"] == f"{REPO}@step200"


def test_keep_all_leaves_the_cache_as_it_was(hub, tmp_path):
    before = sorted(files_in(hub))
    trajectory(REPO, METRICS, revisions=["step100"], keep="all", cache=False, **SCAN)
    assert sorted(files_in(hub)) == before


def test_cli_scan_streams_and_removes(hub, tmp_path, capsys, downloading):
    out = tmp_path / "scan"
    revisions = ["--revision", "step100", "--revision", "step300", "--keep", "none"]
    probe = ["--metrics", "prefix_matching", "--n", "8", "--batch", "4", "--out", str(out)]
    argv = ["scan", REPO, *revisions, *probe]
    assert main(argv) == 0
    assert (out / "scores.csv").is_file()
    remaining = {p.name for p in (hub / "models--org--tiny" / "refs").iterdir()}
    assert remaining == {"step200"}  # only the revision that was not scanned is left


@pytest.mark.parametrize(
    "source, revision, hint",
    [(REPO, "step999", "step999"), ("org/absent", "step100", "org/absent")],
)
def test_unknown_revision_or_repo_exits_2_with_one_line(
    hub, tmp_path, capsys, source, revision, hint
):
    argv = ["scan", source, "--revision", revision, "--out", str(tmp_path / "x")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and hint in err and "Traceback" not in err
    with pytest.raises(IhprobeError, match="not in the local HF cache"):
        trajectory(source, METRICS, revisions=[revision], cache=False, **SCAN)


def test_bad_keep_is_refused(hub):
    with pytest.raises(IhprobeError, match="keep='some' is not one of all, none"):
        trajectory(REPO, METRICS, revisions=["step100"], keep="some", cache=False, **SCAN)


def test_duplicates_are_left_out_of_the_fit_and_marked_in_the_figure():
    from ihprobe.dynamics.changepoint import emergence
    from ihprobe.figures.emergence import trajectory_figure

    tokens = [0] + [2**k * 1000 for k in range(12)]
    ps = [0.02] * 7 + [0.8] * 6  # PS jumps between 32k and 64k tokens
    copies = {1, 2, 3}  # early branches that hold the final weights (pythia issue #205)
    values = [0.8 if i in copies else v for i, v in enumerate(ps)]
    table = pd.DataFrame(
        {
            "model": "m",
            "step": [t // 1000 for t in tokens],
            "tokens": tokens,
            "metric": "prefix_matching",
            "value": values,
            "duplicate_of": [("m@final" if i in copies else None) for i in range(len(tokens))],
        }
    )
    point = emergence(table)
    assert (point.tokens_low, point.tokens_high) == (32000.0, 64000.0)
    assert point.curve["duplicate"].sum() == len(copies)  # the curve keeps them, marked
    fooled = emergence(table, include_duplicates=True)
    assert not fooled.transition or (fooled.tokens_low, fooled.tokens_high) != (32000, 64000)
    names = [trace.name for trace in trajectory_figure(table, point).data]
    marked = [n for n in names if "same weights" in n]
    assert len(marked) == 1
    crosses = next(t for t in trajectory_figure(table, point).data if t.name == marked[0])
    assert sorted(crosses.x) == [tokens[i] for i in sorted(copies)]
