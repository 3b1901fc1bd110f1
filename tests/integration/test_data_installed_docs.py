"""The documentation corpus: files split by a hash of their name, tokens counted per split, a
missing package named in one line, and the producer trains on the train split."""

from __future__ import annotations

import json

import pytest

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.data import installed_docs
from ihprobe.data.installed_docs import DocSource, build_docs_corpus, is_held_out


@pytest.fixture
def fake_docs(tmp_path, monkeypatch, cache_dir):
    """Two 'packages' of 60 small text files each, in place of the Debian documentation."""
    for name in ("alpha", "beta"):
        root = tmp_path / "share" / name / "doc"
        (root / "sub").mkdir(parents=True)
        for i in range(60):
            where = root / "sub" if i % 2 else root
            text = f"{name} manual page {i}. " + "The option :set number shows line numbers. " * 8
            (where / f"page{i}.txt").write_text(text)
    sources = {
        name: DocSource(
            f"{name}-doc",
            str(tmp_path / "share" / name / "do[c]"),
            "**/*.txt",
            "MIT",
            f"{name}'s docs",
        )
        for name in ("alpha", "beta")
    }
    monkeypatch.setattr(installed_docs, "SOURCES", sources)
    return tmp_path


@pytest.mark.slow
def test_the_corpus_is_split_by_name_and_counted(fake_docs):
    out = fake_docs / "corpus"
    manifest = build_docs_corpus(out, sources=("alpha", "beta"), vocab_size=300)
    train = sorted(p.name for p in (out / "train").rglob("*.txt"))
    heldout = sorted(p.name for p in (out / "heldout").rglob("*.txt"))
    assert len(train) + len(heldout) == 120 and heldout  # 5% of 120 files: a few held out
    expected = sorted(
        f"{rel.replace('/', '__')}.txt"
        for name in ("alpha", "beta")
        for rel in [f"page{i}.txt" if i % 2 == 0 else f"sub/page{i}.txt" for i in range(60)]
        if is_held_out(f"{name}/{rel}")
    )
    assert heldout == expected
    assert manifest["splits"]["train"]["files"] == len(train)
    assert manifest["sources"]["alpha"]["files"] == 60
    tokens = manifest["tokens"]["bpe300"]
    assert tokens["train"] > 20 * tokens["heldout"] > 0
    assert json.loads((out / "manifest.json").read_text()) == manifest
    again = build_docs_corpus(out, sources=("alpha", "beta"), vocab_size=300)  # reused
    assert again == manifest


@pytest.mark.slow
def test_the_producer_trains_on_the_train_split(fake_docs):
    out = fake_docs / "corpus"
    build_docs_corpus(out, sources=("alpha",), vocab_size=300)
    producer = ihprobe.make_producer(
        "natural", batch_size=2, context=16, text=str(out / "train"), vocab_size=300
    )
    assert producer.sample(0).tokens.shape == (2, 16)


def test_a_missing_package_is_named(fake_docs, monkeypatch):
    monkeypatch.setattr(
        installed_docs, "SOURCES", {"gone": DocSource("gone-doc", "/nonexistent", "*", "-", "x")}
    )
    with pytest.raises(IhprobeError, match="apt-get install gone-doc"):
        build_docs_corpus(fake_docs / "c", sources=("gone",))
    with pytest.raises(IhprobeError, match="unknown corpus sources"):
        build_docs_corpus(fake_docs / "c", sources=("nope",))
