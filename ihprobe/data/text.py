"""Natural text: files, a directory, a glob, an HF ``datasets`` source, or the embedded default.

The text is tokenized once, by a given HF tokenizer or by a byte-level BPE trained here with
``tokenizers``, into one token stream where every document ends with EOS. The stream is cached as
a ``.npy`` file (memory-mapped when read) keyed by (source, tokenizer), together with the
tokenizer, so the next run with the same corpus starts at once and works offline. Batches are
windows of ``context`` tokens at seeded random offsets of the stream.

>>> p = NaturalProducer(batch_size=2, context=16, vocab_size=300)   # embedded default, local BPE
>>> p.sample(0).tokens.shape, p.special
(torch.Size([2, 16]), {'eos': 0, 'sep': 1})

A directory's files are read when their suffix is in ``TEXT_SUFFIXES``:

>>> TEXT_SUFFIXES
('.txt', '.md', '.rst', '.text')
"""

from __future__ import annotations

import functools
import glob
import json
import logging
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer

from ihprobe.core import cache
from ihprobe.core.errors import IhprobeError
from ihprobe.core.network import hub_calls, hub_reachable
from ihprobe.data.base import Batch, Producer
from ihprobe.data.corpus import default_documents
from ihprobe.data.options import ProducerOptions
from ihprobe.data.tokenizer import EOS, SEP, train_bpe

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")  # files taken from a directory
DATASET_BUILDERS = {  # local data file suffix -> HF `datasets` builder
    ".txt": "text",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}


@dataclass(frozen=True)
class Corpus:
    """A tokenized corpus: the token stream (documents joined by EOS) and its tokenizer."""

    tokens: np.ndarray  # 1-D, unsigned ints, memory-mapped from the cache
    tokenizer: object  # transformers.PreTrainedTokenizerFast
    eos: int
    sep: int

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)


def load_corpus(
    text: str | list[str] | None = None,
    *,
    dataset: str | None = None,
    dataset_config: str | None = None,
    dataset_split: str = "train",
    text_column: str = "text",
    tokenizer: str | None = None,
    vocab_size: int = 512,
    docstrings: bool = False,
) -> Corpus:
    """Tokenize a text source (cached) and return its token stream and tokenizer.

    Args:
        text: a file, a directory (its ``*.txt/*.md/*.rst`` files, recursively), a glob, or a
            list of these; each file is one document. None (and no ``dataset``): the embedded
            default corpus (Python's own documentation).
        dataset: an HF ``datasets`` name, or local data file(s) (.txt/.json/.jsonl/.csv/.parquet);
            each record's ``text_column`` is one document.
        tokenizer: an HF tokenizer directory or hub id (local HF cache when offline); None trains
            a byte-level BPE with ``vocab_size`` ids on the corpus itself.
        docstrings: with the embedded default, add standard-library docstrings.

    >>> corpus = load_corpus(vocab_size=300)
    >>> int(corpus.tokens[-1]) == corpus.eos
    True
    """
    source = _source_spec(text, dataset, dataset_config, dataset_split, text_column, docstrings)
    tok_spec = {"tokenizer": tokenizer} if tokenizer else {"bpe": int(vocab_size)}
    spec_json = json.dumps({"source": source, **tok_spec}, sort_keys=True)
    return _load_cached(str(cache.root()), spec_json)


@functools.lru_cache(maxsize=8)
def _load_cached(cache_root: str, spec_json: str) -> Corpus:  # the root keys the memo too
    spec = json.loads(spec_json)

    def build(directory: Path) -> None:
        docs = _documents(spec["source"])
        if not any(d.strip() for d in docs):
            raise IhprobeError(
                f"the corpus {_describe(spec['source'])} is empty: pass files with text in them."
            )
        tok = _tokenizer(spec, docs)
        eos = tok.convert_tokens_to_ids(tok.eos_token)
        ids = tok(docs, add_special_tokens=False)["input_ids"]
        stream = np.fromiter(
            (i for doc in ids for i in [*doc, eos]),
            dtype=np.int64,
            count=sum(len(d) + 1 for d in ids),
        )
        dtype = np.uint16 if len(tok) <= np.iinfo(np.uint16).max else np.uint32
        np.save(directory / "tokens.npy", stream.astype(dtype))
        tok.save_pretrained(str(directory / "tokenizer"))
        log.info(
            "tokenized %s: %d documents, %d tokens",
            _describe(spec["source"]),
            len(docs),
            len(stream),
        )

    path = cache.entry("corpus", spec, build, check=_checked_stream)
    tok = AutoTokenizer.from_pretrained(str(path / "tokenizer"))
    tokens = np.load(path / "tokens.npy", mmap_mode="r")
    return Corpus(
        tokens=tokens,
        tokenizer=tok,
        eos=tok.convert_tokens_to_ids(tok.eos_token),
        sep=tok.convert_tokens_to_ids(SEP),
    )


def _checked_stream(directory: Path) -> None:
    """ValueError unless the cached corpus holds a non-empty 1-D integer token stream and a
    saved tokenizer (an entry edited or cut short is tokenized again)."""
    tokens = np.load(directory / "tokens.npy", mmap_mode="r", allow_pickle=False)
    if tokens.ndim != 1 or not len(tokens) or tokens.dtype.kind != "u":
        raise ValueError("tokens.npy is not a non-empty stream of token ids")
    if not any((directory / "tokenizer").glob("*.json")):
        raise ValueError("the tokenizer is missing")


def _tokenizer(spec: dict, docs: list[str]):
    if "bpe" in spec:
        return train_bpe(docs, vocab_size=spec["bpe"])
    try:
        tok = AutoTokenizer.from_pretrained(spec["tokenizer"])
    except OSError as err:
        raise IhprobeError(
            f"cannot load tokenizer {spec['tokenizer']!r} (a directory with tokenizer files, or a "
            f"hub id in the local HF cache): {err}"
        ) from err
    if tok.eos_token is None:
        tok.add_special_tokens({"eos_token": EOS})
    if SEP not in tok.get_vocab():
        tok.add_special_tokens({"additional_special_tokens": [SEP]})
    return tok


# ----------------------------------------------------------------------------- sources


def _source_spec(text, dataset, dataset_config, split, column, docstrings) -> dict:
    if text is not None and dataset is not None:
        raise IhprobeError("pass either text (files) or dataset, not both.")
    if dataset is not None:
        files = (
            _expand(dataset) if any(c in dataset for c in "*?/\\") or Path(dataset).exists() else []
        )
        spec = {"dataset": dataset, "config": dataset_config, "split": split, "column": column}
        return {**spec, "files": [_stat(f) for f in files]}
    if text is not None:
        items = [text] if isinstance(text, str) else text
        if not isinstance(items, (list, tuple)) or not items:
            raise IhprobeError(
                f"text={text!r} names no files: pass a file, a directory, a glob or a list of them."
            )
        files = []
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise IhprobeError(f"text holds {item!r}; each entry must be a path or glob.")
            found = _expand(item)
            if not found:
                raise IhprobeError(
                    f"no text files at {item!r}: pass a file, a directory with "
                    f"{'/'.join(TEXT_SUFFIXES)} files, or a glob that matches files."
                )
            files.extend(found)
        return {"files": [_stat(f) for f in files]}
    return {"default": True, "docstrings": bool(docstrings), "python": sys.version.split()[0]}


def _expand(item: str) -> list[Path]:
    path = Path(item).expanduser()
    if path.is_file():
        return [path.resolve()]
    if path.is_dir():
        # regular files only: a FIFO or device named *.txt would hang the reader
        found = path.rglob("*")
        return sorted(p.resolve() for p in found if p.suffix in TEXT_SUFFIXES and p.is_file())
    return sorted(
        Path(p).resolve() for p in glob.glob(str(path), recursive=True) if Path(p).is_file()
    )


def _stat(path: Path) -> list:
    st = path.stat()
    return [str(path), st.st_size, st.st_mtime_ns]  # a changed file gets a new cache entry


def _describe(source: dict) -> str:
    if source.get("default"):
        return "embedded default (pydoc_data)"
    if "dataset" in source:
        return f"dataset {source['dataset']!r}"
    return f"{len(source['files'])} file(s) from {source['files'][0][0]}"


def _documents(source: dict) -> list[str]:
    if source.get("default"):
        return default_documents(docstrings=source["docstrings"])
    if "dataset" in source:
        return _dataset_documents(source)
    return [_decoded(Path(f)) for f, _, _ in source["files"]]


def _decoded(path: Path) -> str:
    """A text file as UTF-8; bytes that are not UTF-8 are replaced (U+FFFD) with a warning
    naming the file, so one stray Latin-1 byte in a corpus neither stops nor silently changes it.
    A file with a NUL byte is not text (an image, an archive): it is refused, naming the file.
    """
    data = path.read_bytes()
    if b"\x00" in data:
        raise IhprobeError(
            f"{path} is a binary file (it holds NUL bytes), not text: pass text files only."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        log.warning("%s is not UTF-8 (byte %d); its bad bytes are read as U+FFFD", path, err.start)
        return data.decode("utf-8", errors="replace")


def _dataset_documents(source: dict) -> list[str]:
    try:  # optional, and 1.7 s to import: loaded only when a dataset source is read
        import datasets
    except ImportError as err:
        raise IhprobeError("reading an HF dataset needs `pip install datasets`.") from err
    files = [f for f, _, _ in source["files"]]
    try:
        if files:
            builder = DATASET_BUILDERS.get(Path(files[0]).suffix)
            if builder is None:
                raise IhprobeError(
                    f"cannot read {files[0]}: local dataset files must be one of "
                    f"{', '.join(DATASET_BUILDERS)}."
                )
            ds = datasets.load_dataset(builder, data_files=files, split=source["split"])
        else:
            with hub_calls(online=hub_reachable()):  # offline: one line at once, no retries
                ds = datasets.load_dataset(
                    source["dataset"], source["config"], split=source["split"]
                )
    except (OSError, ConnectionError, ValueError) as err:
        if isinstance(err, IhprobeError):
            raise
        raise IhprobeError(
            f"cannot load dataset {source['dataset']!r} (offline? pass local files instead): {err}"
        ) from err
    if source["column"] not in ds.column_names:
        raise IhprobeError(
            f"dataset has no column {source['column']!r}; its columns are {ds.column_names}: "
            "pass text_column=..."
        )
    return [str(t) for t in ds[source["column"]]]


# ----------------------------------------------------------------------------- the producer


@dataclass(frozen=True)
class TextOptions(ProducerOptions):
    """Which natural text, tokenized how: the arguments of :func:`load_corpus`.

    The natural producer's options, and the corpus options of every producer built on text.

    >>> TextOptions(vocab_size=300).load().vocab_size
    300
    """

    text: str | tuple[str, ...] | None = None
    dataset: str | None = None
    dataset_config: str | None = None
    dataset_split: str = "train"
    text_column: str = "text"
    tokenizer: str | None = None
    vocab_size: int = 512
    docstrings: bool = False

    def load(self) -> Corpus:
        """The tokenized corpus these options name (cached)."""
        return load_corpus(**{f.name: getattr(self, f.name) for f in fields(TextOptions)})


class NaturalProducer(Producer):
    """Windows of ``context`` tokens at seeded random offsets of a tokenized corpus.

    Options: :class:`TextOptions`; ``special`` holds the EOS and SEP ids of the tokenizer (SEP
    is added when a given tokenizer lacks one, so Bi-Induct can use it).
    """

    name = "natural"
    Options = TextOptions
    options: TextOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        self.corpus = self.options.load()
        if len(self.corpus.tokens) <= self.context:
            raise IhprobeError(
                f"the corpus has {len(self.corpus.tokens)} tokens, fewer than one context of "
                f"{self.context}: add text or use a shorter context."
            )
        self.vocab_size = self.corpus.vocab_size
        self.special = {"eos": self.corpus.eos, "sep": self.corpus.sep}

    def sample(self, step: int) -> Batch:
        g = self.generator(step)
        n = len(self.corpus.tokens)
        starts = torch.randint(n - self.context + 1, (self.batch_size,), generator=g).numpy()
        rows = self.corpus.tokens[starts[:, None] + np.arange(self.context)]
        return Batch(tokens=torch.from_numpy(rows.astype(np.int64)))

    def tokenizer(self):
        return self.corpus.tokenizer
