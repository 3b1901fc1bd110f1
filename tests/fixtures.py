"""Shared fixtures: tiny checkpoints of each architecture, built offline, a blocked network and a
private data cache. The builders behind them are in ``helpers.py``.

Every test runs with socket connections refused, so a hidden download fails loudly instead of
hanging or silently succeeding on a developer's machine, and with ``IHPROBE_CACHE`` in a folder
of its module's own, so no test reads or fills the user's cache.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import warnings
from pathlib import Path

import pytest
import torch

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.dynamics import trajectories
from ihprobe.io.models import provenance
from tests.helpers import (
    ARCHS,
    VOCAB,
    NetworkBlocked,
    save_checkpoint,
    tiny_hf_model,
    train_two_layer,
    valid_checkpoint,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
torch.set_num_threads(1)  # tiny models: one thread is fastest, and xdist runs two workers


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    """Refuse every outgoing connection except to this machine (loopback, for Chromium)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1")):
            return real_connect(self, address)
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        raise NetworkBlocked(f"tests must not use the network (tried {address!r})")

    socket.socket.connect = guarded
    yield
    socket.socket.connect = real_connect


@pytest.fixture(scope="module", autouse=True)
def data_cache(tmp_path_factory) -> Path:
    """``IHPROBE_CACHE`` in a fresh folder per test module; tests of a module share it (fitted
    producers, corpora and scans are built once)."""
    path = tmp_path_factory.mktemp("ihprobe-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IHPROBE_CACHE", str(path))
        yield path


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """``IHPROBE_CACHE`` in an empty folder for this test alone: for tests that count entries."""
    path = tmp_path / "cache"
    monkeypatch.setenv("IHPROBE_CACHE", str(path))
    return path


@pytest.fixture(scope="session")
def tokenizer():
    """A byte-level BPE with 512 ids trained on Python's own documentation (EOS=0, SEP=1)."""
    from ihprobe.data.corpus import default_documents
    from ihprobe.data.tokenizer import train_bpe

    return train_bpe(default_documents(), vocab_size=512)


@pytest.fixture(scope="session", params=ARCHS)
def tiny_checkpoint(request, tmp_path_factory, tokenizer) -> tuple[str, Path]:
    """(arch, directory) of a saved tiny random checkpoint with a tokenizer, per architecture."""
    arch = request.param
    directory = tmp_path_factory.mktemp(f"tiny-{arch}")
    save_checkpoint(tiny_hf_model(arch), directory, tokenizer)
    return arch, directory


@pytest.fixture(scope="session")
def two_layer_checkpoint(tmp_path_factory) -> Path:
    """A 2-layer GPT-NeoX trained on periodic rows past its induction phase change (about a
    minute): induction heads in layer 1 fed by a previous-token head in layer 0 (one or all four:
    how many varies with the CPU that trains it, as float sums do). Tests that
    use it carry ``@pytest.mark.xdist_group("two-layer-trained")``, so that ``make test`` runs
    them on one worker and trains the model once."""
    directory = tmp_path_factory.mktemp("two-layer-trained")
    return save_checkpoint(train_two_layer(), directory, id_tokenizer(VOCAB))


@pytest.fixture()
def counted(monkeypatch) -> list:
    """The steps of the checkpoints ``ihprobe.trajectory`` scans (not served from its cache)."""
    calls = []
    real = trajectories.scan

    @functools.wraps(real)  # keeps scan's signature, which trajectory checks keywords against
    def scan(model, *args, **kwargs):
        calls.append(provenance(model).step)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(trajectories, "scan", scan)
    return calls


# the adversarial tests' checkpoint: a valid one per module, a fresh copy per test to break
@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return valid_checkpoint(tmp_path_factory.mktemp("base") / "ckpt")


@pytest.fixture
def ckpt(base, tmp_path) -> Path:
    """A fresh copy of ``base`` to break, in ``tmp_path/work/ckpt``."""
    return Path(shutil.copytree(base, tmp_path / "work" / "ckpt"))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Each architecture of the parity matrix (``tests/test_model_inputs.py``), saved and loaded
    once per module, on demand: ``matrix(kind)``."""
    from tests.integration.test_model_inputs import ARCHITECTURES, V, build

    loaded = {}

    def get(kind):
        if kind not in loaded:
            folder = tmp_path_factory.mktemp(kind)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                save_checkpoint(build(ARCHITECTURES[kind]), folder, id_tokenizer(V))
                loaded[kind] = ihprobe.load(folder)
        return loaded[kind]

    return get
