"""``ihprobe patch SOURCE --out DIR``: activation, attribution and path patching of the heads.

On repeated random tokens and the same rows with the second half re-drawn, patches each head's
clean output into the corrupted run, estimates the same by attribution patching, and path-patches
the previous-token head into the queries, keys and values of the induction head (the top
prefix-matching head; or ``--sender``/``--receiver``). Writes ``OUT/patch.csv`` (``model,
method, layer, head, position, value, fraction``), ``OUT/path.csv`` and ``OUT/patch.html``
(heatmaps, the attribution scatter, the path table and an interactive attention viewer).

    ihprobe patch runs/demo/main/checkpoints/step-002000 --out circuit/demo
    ihprobe patch CKPT --per head_position --sender 0.3 --receiver 1.2
"""

from __future__ import annotations

from ihprobe.cli._common import add_source, any_int, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "patch", help="activation / attribution / path patching of heads; CSV + HTML"
    )
    add_source(p, out="patch")
    p.add_argument("--per", choices=("head", "head_position"), default="head",
                   help="patch whole heads, or each head at each position")  # fmt: skip
    p.add_argument("--sender", help="previous-token head as LAYER.HEAD (default: found by scan)")
    p.add_argument("--receiver", help="induction head as LAYER.HEAD (default: found by scan)")
    p.add_argument(
        "--n",
        type=positive_int,
        help="half-length of the repeated tokens (default min(50, n_ctx/2))",
    )
    p.add_argument("--batch", type=positive_int, default=20, help="rows of tokens")
    p.add_argument("--seed", type=any_int, default=0, help="seed of the token rows")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.cli._common import refuse_overwrite
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
    refuse_overwrite(targets, args.force)
    model = models.load(args.source, revision=args.revision)
    found = circuit_heads(model, n=args.n, seed=args.seed) if None in (sender, receiver) else None
    heads = CircuitHeads(receiver=receiver or found.receiver, sender=sender or found.sender)
    frames, sections = patch_sections(model, heads=heads, per=args.per, n=args.n,
                                      batch=args.batch, seed=args.seed)  # fmt: skip
    for target, frame in zip(targets[:2], (frames["patch"], frames["path"]), strict=True):
        atomic_write(target, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    write_report(targets[2], f"ihprobe patch: {args.source}", sections)
    best = frames["patch"].query("method == 'activation'").nlargest(1, "fraction").iloc[0]
    print(
        f"top head L{best.layer}H{best['head']}: restores {best.fraction:.1%} of the logit "
        "difference"
    )
    for row in frames["path"].itertuples():
        print(f"path {row.sender} -> {row.receiver} {row.input}: restores {row.fraction:.1%}")
    print(f"wrote {targets[0]}, {targets[1]} and {targets[2]}")
    return 0


def _head_option(value: str | None, flag: str) -> tuple[int, int] | None:
    """``"1.2"`` -> ``(1, 2)``; None stays None."""
    from ihprobe.core.errors import IhprobeError

    if value is None:
        return None
    try:
        layer, head = (int(part) for part in value.split("."))
    except ValueError:
        raise IhprobeError(f"{flag} takes LAYER.HEAD, e.g. 1.2 (got {value!r}).") from None
    return layer, head
