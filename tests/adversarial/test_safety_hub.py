"""Nothing lost in the HF cache, nothing refused wrongly from it (issue 59, items 5 and 8).

``--keep none`` removes only the revisions that the series itself downloaded: a snapshot the user
points at by its local path, or a revision that was in the cache before, stays whole (snapshot,
ref and blob). An ihprobe checkpoint laid out in a standard HF cache (every file a symlink into
``blobs/``, ``ihprobe.json`` recording their SHA-256) loads offline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ihprobe
from ihprobe.cli import main
from ihprobe.io.hub_cache import Downloads
from ihprobe.training.config import TrainConfig
from tests.helpers import TINY_TRAIN
from tests.hub_layout import lay_out, use_offline

REPO = "org/ihprobe-tiny"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The last checkpoint of a tiny ihprobe run (its ihprobe.json hashes every file)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    ihprobe.train(TrainConfig(**{**TINY_TRAIN, "steps": 2, "n_checkpoints": 1}, out=str(out)))
    return sorted((out / "checkpoints").iterdir())[-1]


@pytest.fixture
def hub(tmp_path, monkeypatch, trained) -> Path:
    """An offline HF cache holding the checkpoint as revision ``main`` of :data:`REPO`."""
    hub = tmp_path / "hub"
    lay_out(hub, REPO, {"main": trained})
    return use_offline(hub, tmp_path, monkeypatch)


def everything(hub: Path) -> list[str]:
    return sorted(p.relative_to(hub).as_posix() for p in hub.rglob("*"))


def test_an_ihprobe_checkpoint_in_an_hf_cache_loads(hub, trained):
    snapshot = next((hub / "models--org--ihprobe-tiny" / "snapshots").iterdir())
    assert all(p.is_symlink() for p in snapshot.iterdir())  # config.json a link into blobs/
    by_id, by_path, original = (ihprobe.load(s) for s in (REPO, str(snapshot), str(trained)))
    for model in (by_id, by_path):
        for (name, value), (_, expected) in zip(
            model.state_dict().items(), original.state_dict().items(), strict=True
        ):
            assert value.equal(expected), name


@pytest.mark.parametrize(
    "how", ["a local snapshot path", "a hub id already cached", "an earlier call's download"]
)
def test_keep_none_leaves_what_the_series_did_not_download(hub, tmp_path, how):
    snapshot = next((hub / "models--org--ihprobe-tiny" / "snapshots").iterdir())
    source = str(snapshot) if how == "a local snapshot path" else REPO
    if how == "an earlier call's download":  # fetched by ihprobe before, with keep="all"
        Downloads().add(snapshot)
    before = everything(hub)
    probe = ["--metrics", "prefix_matching", "--n", "6", "--batch", "2"]
    assert main(["scan", source, "--keep", "none", *probe, "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "scores.csv").is_file()
    assert everything(hub) == before  # snapshot, its ref and its blobs all stay
