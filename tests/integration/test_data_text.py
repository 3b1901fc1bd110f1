"""Natural text: the embedded default corpus and a locally trained BPE, files, datasets, caching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer
from ihprobe.data import text as text_mod


@pytest.fixture
def docs_dir(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text("The cat sat on the mat. " * 40)
    (d / "b.md").write_text("Induction heads copy what came after the earlier token. " * 40)
    (d / "ignored.bin").write_bytes(b"\x00\x01")
    return d


def test_default_corpus_bpe_round_trips_and_cache_is_reused(cache_dir, monkeypatch):
    p = make_producer("natural", batch_size=4, context=32, vocab_size=300)
    tok = p.tokenizer()
    sentence = "Induction heads copy the token that followed an earlier occurrence."
    assert tok.decode(tok(sentence).input_ids) == sentence
    assert p.vocab_size == len(tok) == 300
    assert p.special == {"eos": 0, "sep": 1}
    # the stream decodes back to the default corpus, documents separated by EOS
    stream = p.corpus.tokens
    first_eos = int(np.argmax(stream == 0))
    from ihprobe.data.corpus import default_documents

    assert tok.decode(stream[:first_eos].tolist()) == default_documents()[0]
    assert (stream == 1).sum() == 0  # SEP never occurs in natural text

    # a second load (fresh process memo) reads the cache instead of retraining
    text_mod._load_cached.cache_clear()

    def fail(*a, **k):
        raise AssertionError("retrained although the cache holds this corpus")

    monkeypatch.setattr(text_mod, "train_bpe", fail)
    q = make_producer("natural", **p.config())
    assert torch.equal(q.sample(5).tokens, p.sample(5).tokens)
    assert len(list((cache_dir / "corpus").iterdir())) == 1


def test_batches_are_windows_of_the_stream_deterministic(cache_dir, docs_dir):
    p = make_producer(
        "natural", batch_size=8, context=16, seed=1, text=str(docs_dir), vocab_size=280
    )
    b = p.sample(3).tokens
    assert b.shape == (8, 16)
    stream = torch.from_numpy(p.corpus.tokens.astype(np.int64))
    windows = stream.unfold(0, 16, 1)
    for row in b:
        assert (windows == row).all(1).any()
    assert torch.equal(p.sample(3).tokens, b)
    assert not torch.equal(p.sample(4).tokens, b)
    assert int((stream == p.special["eos"]).sum()) == 2  # two documents (the .bin is skipped)


def test_glob_list_and_changed_file_gets_new_cache_entry(cache_dir, docs_dir):
    a = make_producer(
        "natural", batch_size=2, context=8, text=[str(docs_dir / "*.txt")], vocab_size=270
    )
    n_before = len(a.corpus.tokens)
    (docs_dir / "a.txt").write_text("A different text entirely, longer than before. " * 60)
    b = make_producer(
        "natural", batch_size=2, context=8, text=[str(docs_dir / "*.txt")], vocab_size=270
    )
    assert len(b.corpus.tokens) != n_before


def test_given_hf_tokenizer_and_local_dataset(cache_dir, tmp_path, tokenizer):
    pytest.importorskip("datasets")  # an optional dependency
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(str(tok_dir))
    data = tmp_path / "d.jsonl"
    data.write_text(
        "\n".join(f'{{"text": "record number {i} says hello world"}}' for i in range(50))
    )
    p = make_producer("natural", batch_size=2, context=8, dataset=str(data), tokenizer=str(tok_dir))
    assert p.vocab_size == len(tokenizer)
    assert int((torch.from_numpy(p.corpus.tokens.astype(np.int64)) == 0).sum()) == 50
    expected = tokenizer("record number 0 says hello world").input_ids
    assert p.corpus.tokens[: len(expected)].tolist() == expected


def test_bad_sources(cache_dir, tmp_path):
    with pytest.raises(IhprobeError, match="no text files"):
        make_producer("natural", batch_size=2, context=8, text=str(tmp_path / "missing"))
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    with pytest.raises(IhprobeError, match="empty"):
        make_producer("natural", batch_size=2, context=8, text=str(empty))
    short = tmp_path / "short.txt"
    short.write_text("tiny")
    with pytest.raises(IhprobeError, match="fewer than one context"):
        make_producer("natural", batch_size=2, context=64, text=str(short), vocab_size=260)
    with pytest.raises(IhprobeError, match="too small"):
        make_producer("natural", batch_size=2, context=8, text=str(short), vocab_size=100)


def test_unreachable_dataset_name_is_a_clear_error(cache_dir):
    pytest.importorskip("datasets")  # an optional dependency
    with pytest.raises(IhprobeError, match="cannot load dataset"):
        make_producer("natural", batch_size=2, context=8, dataset="nobody/no-such-dataset")


def test_docstrings_extend_the_embedded_corpus():
    from ihprobe.data.corpus import default_documents

    plain, more = default_documents(), default_documents(docstrings=True)
    assert more[: len(plain)] == plain  # importing the modules ran nothing (no __main__)
    assert sum(map(len, more)) > 2 * sum(map(len, plain))


def test_dataset_without_the_datasets_package_says_how_to_get_it(cache_dir, tmp_path, monkeypatch):
    import sys

    data = tmp_path / "d.txt"
    data.write_text("hello world\n" * 20)
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(IhprobeError, match="pip install datasets"):
        make_producer("natural", batch_size=2, context=8, dataset=str(data))
