"""``ihprobe composition SOURCE``: Q, K and V composition scores of every pair of heads.

Writes ``OUT/composition.csv`` (``model, layer_from, head_from, layer_to, head_to, kind, value,
raw, baseline_sd``; value = raw score minus the random-matrix baseline) and
``OUT/composition.html`` (one heatmap per kind, the strongest pairs), and prints the strongest
K-composition pairs.

    ihprobe composition runs/demo/main/checkpoints/step-002000 --out circuit/demo
"""

from __future__ import annotations

from ihprobe.cli._common import add_source, any_int, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "composition", help="Q/K/V composition scores of every head pair; CSV + HTML"
    )
    add_source(p, out="composition")
    p.add_argument(
        "--draws", type=positive_int, default=50, help="random-matrix draws for the baseline"
    )
    p.add_argument("--seed", type=any_int, default=0, help="seed of the baseline draws")
    p.add_argument(
        "--processing", choices=("none", "tl"), default="none",
        help="'tl' folds the norms' weights into W_Q/W_K/W_V first (TransformerLens style)",
    )  # fmt: skip
    p.add_argument("--top", type=positive_int, default=3, help="pairs printed")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.cli._common import refuse_overwrite
    from ihprobe.core.files import atomic_write
    from ihprobe.figures.circuit_report import composition_sections
    from ihprobe.figures.report import write_report
    from ihprobe.io import models

    out = Path(args.out)
    targets = [out / "composition.csv", out / "composition.html"]
    refuse_overwrite(targets, args.force)
    model = models.load(args.source, revision=args.revision, processing=args.processing)
    frame, sections = composition_sections(model, draws=args.draws, seed=args.seed)
    atomic_write(targets[0], lambda tmp: frame.to_csv(tmp, index=False))
    write_report(targets[1], f"ihprobe composition: {args.source}", sections)
    for row in frame.query("kind == 'k'").nlargest(args.top, "value").itertuples():
        print(f"K L{row.layer_from}H{row.head_from} -> L{row.layer_to}H{row.head_to}: "
              f"{row.value:+.4f} ({row.value / row.baseline_sd:+.1f} baseline SDs)")  # fmt: skip
    print(f"wrote {targets[0]} ({len(frame)} rows) and {targets[1]}")
    return 0
