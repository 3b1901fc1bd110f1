"""``ihprobe repeated-tensors SOURCE... | --suite NAME``: checkpoints of a series that repeat an
earlier one's weights, whole (``duplicate_of``) or in part: a shard or some tensors (Pythia
issue #206: one shard of a pythia-12b checkpoint is an earlier step's).

Every checkpoint is read once and each tensor hashed (or its digests come from an earlier read);
prints one line per flagged checkpoint, or the table as JSON (``--json``): one row per
checkpoint, ``checkpoint, step, tokens, duplicate_of, repeats``
(:func:`ihprobe.series.repeats.repeated_checkpoints`).

    ihprobe repeated-tensors --suite pythia --suite-option size=12b --steps 1000,2000,3000
    ihprobe repeated-tensors runs/demo
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli._suite import add_sources_or_suite


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "repeated-tensors",
        help="checkpoints that repeat an earlier one's weights, whole or a shard or tensors",
    )
    add_sources_or_suite(p, out=None)
    flags.add_json(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    from ihprobe.cli._suite import suite_of
    from ihprobe.io.sources import sources_of
    from ihprobe.series.repeats import repeated_checkpoints

    ckpts = suite_of(args) or sources_of(args.sources, args.revision or None)
    table = repeated_checkpoints(ckpts, progress=flags.progress(args))
    if args.json:
        records = table.astype(object).where(table.notna(), None).to_dict("records")
        print(json.dumps(records, indent=2))
        return 0
    flagged = table[table["duplicate_of"].notna() | table["repeats"].notna()]
    for row in flagged.itertuples():
        said = f"the same weights as {row.duplicate_of}" if row.duplicate_of else row.repeats
        print(f"{row.checkpoint}: {said}")
    print(
        f"{len(flagged)} of {len(table)} checkpoints repeat an earlier checkpoint's weights, "
        "whole or in part"
    )
    return 0
