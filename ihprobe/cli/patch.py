"""``ihprobe patch SOURCE --out DIR``: activation, attribution and path patching of the heads.

On repeated random tokens and the same rows with the second half re-drawn, patches each head's
clean output into the corrupted run, estimates the same by attribution patching, and path-patches
the previous-token head into the queries, keys and values of the induction head (the top
prefix-matching head; or ``--sender``/``--receiver``). SOURCE is a checkpoint, a run directory
(its last checkpoint) or a hub id. Writes ``OUT/patch.csv`` and ``OUT/path.csv`` (both in the one
long CSV shape, metrics ``activation_patch``, ``attribution_patch`` and ``path_patch``) and
``OUT/patch.html`` (heatmaps, the attribution scatter, the path table and an interactive
attention viewer).

    ihprobe patch runs/demo/main/checkpoints/step-002000 --out circuit/demo
    ihprobe patch CKPT --per head_position --sender 0.3 --receiver 1.2
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli._stages import stage


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "patch", help="activation / attribution / path patching of heads; CSV + HTML"
    )
    flags.add_sources(p, out="patch", many=False)
    p.add_argument(
        "--per",
        choices=("head", "head_position"),
        default="head",
        help="patch whole heads, or each head at each position",
    )
    p.add_argument("--sender", help="previous-token head, L0H1 or 0.1 (default: found by scan)")
    p.add_argument("--receiver", help="induction head, L1H2 or 1.2 (default: found by scan)")
    flags.add_probe_rows(p, batch=20, bos=False)
    flags.add_model_flags(p)
    flags.add_placement(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.core.files import atomic_write
    from ihprobe.figures.circuit_report import CircuitHeads, circuit_heads, patch_sections
    from ihprobe.figures.report import write_report
    from ihprobe.io import models

    sender, receiver = (
        _head_option(args.sender, "--sender"),
        _head_option(args.receiver, "--receiver"),
    )
    out = Path(args.out)
    targets = [out / "patch.csv", out / "path.csv", out / "patch.html"]
    flags.refuse_overwrite(targets, args.force)
    ckpt = flags.one_checkpoint(args)
    stage(f"loading {ckpt.label}")
    where = {"device": args.device, "dtype": args.dtype, **flags.placement(args)}
    model = models.load(ckpt.source, revision=ckpt.revision, **where)
    found = circuit_heads(model, n=args.n, seed=args.seed) if None in (sender, receiver) else None
    heads = CircuitHeads(receiver=receiver or found.receiver, sender=sender or found.sender)
    stage("activation, attribution and path patching")
    frames, sections = patch_sections(
        model, heads=heads, per=args.per, n=args.n, batch=args.batch, seed=args.seed
    )
    tables = _csv_tables(frames, models.provenance(model))
    for target, table in zip(targets[:2], tables, strict=True):
        atomic_write(target, lambda tmp, table=table: table.to_csv(tmp, index=False))
    write_report(targets[2], f"ihprobe patch: {ckpt.label}", sections)
    best = frames["patch"].query("method == 'activation'").nlargest(1, "fraction").iloc[0]
    print(
        f"top head L{best.layer}H{best['head']}: restores {best.fraction:.1%} of the logit "
        "difference"
    )
    for row in frames["path"].itertuples():
        print(f"path {row.sender} -> {row.receiver} {row.input}: restores {row.fraction:.1%}")
    print(f"wrote {targets[0]}, {targets[1]} and {targets[2]}")
    return 0


def _csv_tables(frames: dict, provenance) -> tuple:
    """``patch.csv`` and ``path.csv`` in the one long CSV shape: metric ``activation_patch``,
    ``attribution_patch`` or ``path_patch``, value the patched logit difference, with
    ``fraction`` (and for paths ``clean``, ``corrupted``) rows by ``statistic``."""
    from ihprobe.io.provenance import csv_table

    patch = frames["patch"].assign(metric=frames["patch"]["method"] + "_patch")
    patch = patch.drop(columns=["method"])
    path = frames["path"]
    receiver = [_named_head(name) for name in path["receiver"]]
    sender = [_named_head(name) for name in path["sender"]]
    path = path.assign(
        layer=[r[0] for r in receiver],
        head=[r[1] for r in receiver],
        sender_layer=[s[0] for s in sender],
        sender_head=[s[1] for s in sender],
        metric="path_patch",
        value=path["patched"],
    ).drop(columns=["sender", "receiver", "patched"])
    return (
        csv_table(patch, provenance, statistics=("fraction",)),
        csv_table(path, provenance, statistics=("fraction", "clean", "corrupted")),
    )


def _named_head(name: str) -> tuple[int, int]:
    """``"L1H2"`` -> ``(1, 2)``."""
    import re

    layer, head = re.fullmatch(r"L(\d+)H(\d+)", name).groups()
    return int(layer), int(head)


def _head_option(value: str | None, flag: str) -> tuple[int, int] | None:
    """``"1.2"`` or ``"L1H2"`` -> ``(1, 2)``; None stays None."""
    from ihprobe.core.heads import head_of

    return None if value is None else head_of(value, flag)
