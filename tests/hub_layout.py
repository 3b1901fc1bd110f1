"""An HF hub cache laid out by hand, as ``huggingface_hub`` leaves one, for offline tests.

``models--org--name/blobs/<sha256>`` holds each file once; ``snapshots/<commit>/`` links into
the blobs; ``refs/<revision>`` holds the commit of each branch.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest


def lay_out(hub: Path, repo: str, revisions: dict[str, Path], *, move: bool = False) -> Path:
    """The checkpoint directories ``revisions`` (revision -> directory) as branches of ``repo``
    in the hub cache ``hub``; their files are copied (moved with ``move``). Returns the repo's
    folder in the cache."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    for revision, directory in revisions.items():
        commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
        snapshot = folder / "snapshots" / commit
        for file in sorted(p for p in Path(directory).rglob("*") if p.is_file()):
            data = file.read_bytes()
            blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            if not blob.exists():
                blob.write_bytes(data)
            target = snapshot / file.relative_to(directory)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.path.relpath(blob, target.parent))
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / revision).write_text(commit)
        if move:
            shutil.rmtree(directory)
    return folder


@pytest.fixture
def offline_hub(tmp_path, monkeypatch) -> Path:
    """An empty HF hub cache in ``tmp_path/hub``, used offline (``HF_HUB_OFFLINE=1``)."""
    hub = tmp_path / "hub"
    hub.mkdir()
    return use_offline(hub, tmp_path, monkeypatch)


def use_offline(hub: Path, tmp_path: Path, monkeypatch) -> Path:
    """Point huggingface_hub at the cache ``hub``, offline, for one test."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return hub
