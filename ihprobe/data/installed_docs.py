"""A natural-text corpus assembled from documentation that Debian packages install.

Nothing is fetched: the text is what ``apt-get install vim-runtime python3.11-doc perl-doc
git-doc`` put on this machine (``make corpus`` installs them and builds the corpus). Each file
is one document; a fixed 5% of the files (chosen by a hash of the file's name, so the split
never depends on the order of discovery) is held out. :func:`build_docs_corpus` copies the
documents into ``train/`` and ``heldout/`` of one directory, tokenizes both with a BPE trained
on ``train/`` alone, and writes ``manifest.json`` with every source's package version, file
count, bytes and tokens.

>>> sorted(SOURCES)
['git', 'perl', 'python', 'vim']
>>> is_held_out("usage/index.rst.txt"), is_held_out("library/os.rst.txt")
(False, False)
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ihprobe.core import cache
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import atomic_write, temporary_folder
from ihprobe.core.outputs import (
    MARKER,
    check_output_folder,
    foreign,
    mark,
    recorded,
    remove_recorded,
    unrecorded,
)
from ihprobe.data.text import load_corpus

HELD_OUT_PERCENT = 5
SPLITS = ("train", "heldout")
CORPUS = "corpus"  # the kind in the folder's marker (ihprobe.core.outputs)


@dataclass(frozen=True)
class DocSource:
    """One package's documentation: where its files are, under which licence."""

    package: str  # the Debian package that installs it
    root: str  # a glob of its documentation folder (the last match in sorted order is used)
    files: str  # a recursive glob of its text files under ``root``
    licence: str
    what: str


SOURCES: dict[str, DocSource] = {
    "vim": DocSource(
        "vim-runtime", "/usr/share/vim/vim[0-9]*/doc", "*.txt", "Vim licence", "Vim's help files"
    ),
    "python": DocSource(
        "python3.11-doc",
        "/usr/share/doc/python3.1[0-9]/html/_sources",
        "**/*.rst.txt",
        "PSF licence",
        "Python's documentation (reStructuredText sources)",
    ),
    "perl": DocSource(
        "perl-doc",
        "/usr/share/perl/5.[0-9]*/pod",
        "*.pod",
        "Artistic or GPL",
        "Perl's manual (POD)",
    ),
    "git": DocSource(
        "git-doc", "/usr/share/doc/git-doc", "*.txt", "GPL-2", "Git's manual (AsciiDoc sources)"
    ),
}


def default_directory() -> Path:
    """Where ``ihprobe corpus build`` puts the corpus: ``<cache root>/corpora/docs``.

    Example:
        >>> default_directory().parts[-2:]
        ('corpora', 'docs')
    """
    return cache.root() / "corpora" / "docs"


def is_held_out(name: str) -> bool:
    """Whether the file called ``name`` (relative to its source) is in the held-out split."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < HELD_OUT_PERCENT


def source_files(name: str) -> tuple[Path, list[Path]]:
    """The documentation folder of source ``name`` and its text files, sorted; an error naming
    the package when it is not installed."""
    source = SOURCES[name]
    roots = sorted(glob.glob(source.root))
    files = (
        sorted(p for p in Path(roots[-1]).glob(source.files) if p.is_file() and not p.is_symlink())
        if roots
        else []
    )
    if not files:
        raise IhprobeError(
            f"no files of {source.what} at {source.root}/{source.files}: install them with "
            f"`apt-get install {source.package}` (or `make corpus`), then build again."
        )
    return Path(roots[-1]), files


def package_version(package: str) -> str | None:
    """The installed Debian version of ``package``, or None where dpkg does not know it."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def build_docs_corpus(
    out: str | Path | None = None,
    *,
    sources: tuple[str, ...] = tuple(SOURCES),
    vocab_size: int = 512,
) -> dict:
    """Copy the sources' documents into ``out/train`` and ``out/heldout``, tokenize both with a
    BPE of ``vocab_size`` ids trained on ``train`` (cached), and return the manifest.

    A directory that already holds a finished corpus of the same sources is reused; a
    different ``vocab_size`` adds its token counts to the manifest.

    Example:
        >>> manifest = build_docs_corpus(vocab_size=512)        # doctest: +SKIP
        >>> manifest["splits"]["train"]["tokens"]               # doctest: +SKIP
        14230417
    """
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise IhprobeError(f"unknown corpus sources {unknown}: choose from {sorted(SOURCES)}.")
    out = Path(out) if out is not None else default_directory()
    out = check_output_folder(out, kind=CORPUS, ours=_older_corpus)  # never a user's folder
    manifest = _manifest(out)
    if manifest is None or set(manifest["sources"]) != set(sources):
        found = {name: source_files(name) for name in sorted(sources)}  # every source, first
        _check_replaceable(out)
        manifest = _copy_documents(out, found)
    key = f"bpe{vocab_size}"
    if key not in manifest["tokens"]:
        manifest["tokens"][key] = _count_tokens(out, vocab_size)
        atomic_write(out / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        tokenizer = out / f"tokenizer-bpe{vocab_size}"
        written = [p.relative_to(out).as_posix() for p in tokenizer.rglob("*") if p.is_file()]
        mark(out, CORPUS, sorted({*(recorded(out) or ()), *written}))
    return manifest


def _manifest(out: Path) -> dict | None:
    """The corpus's manifest, or None where there is none or it cannot be read (the corpus is
    then built again)."""
    try:
        manifest = json.loads((out / "manifest.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    fields = isinstance(manifest, dict) and {"sources", "tokens"} <= set(manifest)
    return manifest if fields and isinstance(manifest["tokens"], dict) else None


def _check_replaceable(out: Path) -> None:
    """Refuse, before anything is written, to replace a corpus whose folder holds anything its
    marker does not record (a user's file, an older corpus that recorded nothing)."""
    if not out.exists() or not any(out.iterdir()):
        return
    if recorded(out) is None:
        raise IhprobeError(
            f"{out} holds a corpus of other sources that does not record which files ihprobe "
            "wrote, so it is not replaced: pass a new --out, or remove it yourself."
        )
    left = unrecorded(out)
    if left:
        raise IhprobeError(
            f"{out} holds {', '.join(left[:3])}, which ihprobe did not write, beside its corpus "
            "of other sources; it is not replaced: move that away, or pass a new --out."
        )


def _older_corpus(folder: Path) -> bool:
    """A corpus built before folders carried ihprobe's marker: a manifest with ihprobe's fields
    beside only the splits and tokenizers this module writes."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    names = set(foreign(folder)) - {MARKER, "manifest.json", *SPLITS}
    return (
        isinstance(manifest, dict)
        and {"sources", "splits", "held_out_percent", "tokens"} <= set(manifest)
        and all(name.startswith("tokenizer-bpe") for name in names)
    )


def _copy_documents(out: Path, found: dict[str, tuple[Path, list[Path]]]) -> dict:
    """Build the corpus of the ``found`` sources beside ``out``; only once it is complete is
    the old corpus's recorded files removed and the new one renamed into its place."""
    manifest = {
        "sources": {},
        "splits": {s: {"files": 0, "bytes": 0} for s in SPLITS},
        "held_out_percent": HELD_OUT_PERCENT,
        "tokens": {},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_folder(out)
    try:
        written = ["manifest.json"]
        for name, (base, files) in found.items():
            for path in files:
                relative = str(path.relative_to(base))
                split = "heldout" if is_held_out(f"{name}/{relative}") else "train"
                target = Path(split) / name / (relative.replace("/", "__") + ".txt")
                (tmp / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, tmp / target)
                written.append(target.as_posix())
                manifest["splits"][split]["files"] += 1
                manifest["splits"][split]["bytes"] += path.stat().st_size
            manifest["sources"][name] = {
                "package": SOURCES[name].package,
                "version": package_version(SOURCES[name].package),
                "licence": SOURCES[name].licence,
                "files": len(files),
                "bytes": sum(p.stat().st_size for p in files),
            }
        atomic_write(tmp / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        mark(tmp, CORPUS, written)
        if out.exists():  # checked: ihprobe's corpus, holding nothing it did not record
            remove_recorded(out)
        os.rename(tmp, out)
    except OSError as err:
        raise IhprobeError(f"could not build the corpus in {out} ({err}).") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _count_tokens(out: Path, vocab_size: int) -> dict:
    """Tokens per split under the BPE trained on ``train`` (both corpora land in the cache)."""
    train = load_corpus(str(out / "train"), vocab_size=vocab_size)
    tokenizer_dir = out / f"tokenizer-bpe{vocab_size}"
    tmp = temporary_folder(tokenizer_dir)  # each file renamed into place whole
    try:
        train.tokenizer.save_pretrained(str(tmp))
        tokenizer_dir.mkdir(exist_ok=True)
        for file in sorted(p for p in tmp.iterdir() if p.name != MARKER):
            os.replace(file, tokenizer_dir / file.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    heldout = load_corpus(str(out / "heldout"), tokenizer=str(tokenizer_dir))
    return {"train": int(len(train.tokens)), "heldout": int(len(heldout.tokens))}
