"""``ihprobe corpus build [--out DIR] [--sources vim,python] [--vocab-size N]``: a natural-text
corpus from installed documentation, split into train and held-out, with its size in tokens."""

from __future__ import annotations

import json

from ihprobe.cli._common import add_quiet, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "corpus", help="build the natural-text corpus from installed documentation"
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="copy installed documentation (Vim, Python, Perl, Git) into train/ and heldout/, "
        "tokenize both, print the manifest",
    )
    build.add_argument("--out", help="corpus directory (default: <IHPROBE_CACHE>/corpora/docs)")
    build.add_argument(
        "--sources",
        default="vim,python,perl,git",
        help="comma-separated sources: vim (vim-runtime), python (python3.11-doc), "
        "perl (perl-doc), git (git-doc)",
    )
    build.add_argument(
        "--vocab-size",
        type=positive_int,
        default=512,
        help="BPE ids, trained on train/ (held-out text uses it too)",
    )
    build.add_argument("--json", action="store_true", help="print the manifest as JSON")
    add_quiet(build, "no stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.data.installed_docs import build_docs_corpus, default_directory

    out = default_directory() if args.out is None else args.out  # --out '' is refused
    sources = tuple(s for s in args.sources.split(",") if s)
    manifest = build_docs_corpus(out, sources=sources, vocab_size=args.vocab_size)
    if args.json:
        print(json.dumps(manifest, indent=1, sort_keys=True))
        return 0
    tokens = manifest["tokens"][f"bpe{args.vocab_size}"]
    for name, s in manifest["sources"].items():
        print(
            f"{name}: {s['files']} files, {s['bytes'] / 1e6:.1f} MB ({s['package']} {s['version']})"
        )
    train, heldout = manifest["splits"]["train"], manifest["splits"]["heldout"]
    print(f"train: {train['files']} files, {tokens['train']:,} tokens (BPE {args.vocab_size})")
    print(f"held out: {heldout['files']} files, {tokens['heldout']:,} tokens")
    print(f"corpus: {out}  (producer option text={out}/train)")
    return 0
