"""``ihprobe composition SOURCE``: Q, K and V composition scores of every pair of heads.

SOURCE is a checkpoint, a run directory (its last checkpoint) or a hub id. Writes
``OUT/composition.csv`` (the one long CSV shape: the receiver in ``layer, head``, the sender in
``sender_layer, sender_head``, metric ``q/k/v_composition``; value = raw score minus the
random-matrix baseline, with ``raw`` and ``baseline_sd`` rows by ``statistic``) and
``OUT/composition.html`` (one heatmap per kind, the strongest pairs), and prints the strongest
K-composition pairs.

    ihprobe composition runs/demo/main/checkpoints/step-002000 --out circuit/demo
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli._stages import stage

STATISTICS = ("raw", "baseline_sd")  # rows beside value = raw - baseline
RECEIVER_COLUMNS = {
    "layer_to": "layer",
    "head_to": "head",
    "layer_from": "sender_layer",
    "head_from": "sender_head",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "composition", help="Q/K/V composition scores of every head pair; CSV + HTML"
    )
    flags.add_sources(p, out="composition", many=False)
    flags.add_draws(p, "random-matrix draws for the baseline", default=50)
    flags.add_seed(p, "seed of the baseline draws")
    p.add_argument(
        "--processing",
        choices=("none", "tl"),
        default="none",
        help="'tl' folds the norms' weights into W_Q/W_K/W_V first (TransformerLens style)",
    )
    flags.add_show(p, "pairs printed")
    flags.add_model_flags(p)
    flags.add_placement(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.core.files import atomic_write
    from ihprobe.figures.circuit_report import composition_sections
    from ihprobe.figures.report import write_report
    from ihprobe.io import models
    from ihprobe.io.provenance import csv_table

    out = Path(args.out)
    targets = [out / "composition.csv", out / "composition.html"]
    flags.refuse_overwrite(targets, args.force)
    ckpt = flags.one_checkpoint(args)
    stage(f"loading {ckpt.label}")
    model = models.load(
        ckpt.source,
        revision=ckpt.revision,
        processing=args.processing,
        device=args.device,
        dtype=args.dtype,
        **flags.placement(args),
    )
    stage("composition scores and their random baselines")
    frame, sections = composition_sections(model, draws=args.draws, seed=args.seed)
    table = csv_table(_receiver_rows(frame), models.provenance(model), statistics=STATISTICS)
    atomic_write(targets[0], lambda tmp: table.to_csv(tmp, index=False))
    write_report(targets[1], f"ihprobe composition: {ckpt.label}", sections)
    for row in frame.query("kind == 'k'").nlargest(args.show, "value").itertuples():
        print(
            f"K L{row.layer_from}H{row.head_from} -> L{row.layer_to}H{row.head_to}: "
            f"{row.value:+.4f} ({row.value / row.baseline_sd:+.1f} baseline SDs)"
        )
    print(f"wrote {targets[0]} ({len(table)} rows) and {targets[1]}")
    return 0


def _receiver_rows(frame):
    """Composition pairs as head rows: the receiver is ``layer, head``, the sender
    ``sender_layer, sender_head``, the metric ``{kind}_composition``."""
    renamed = frame.rename(columns=RECEIVER_COLUMNS)
    return renamed.assign(metric=frame["kind"] + "_composition").drop(columns="kind")
