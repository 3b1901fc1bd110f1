"""``ihprobe scan SOURCE...``: score every head of one or more checkpoints.

Writes ``OUT/scores.csv`` (the long table of :meth:`ihprobe.HeadScores.to_frame`, one block per
checkpoint, with ``duplicate_of`` naming an earlier checkpoint of identical weights) and
``OUT/heatmaps.html`` (a heatmap per head metric of each source, with a slider over the
checkpoints of a run or several revisions), and prints
the top heads. A run directory is swept checkpoint by checkpoint into one skeleton, with a
progress bar. Under ``torchrun --nproc-per-node N`` each rank scans every N-th checkpoint and
rank 0 writes the same files one process would.

    ihprobe scan runs/demo --metrics prefix_matching,ar_accuracy --out scans/demo
    ihprobe scan EleutherAI/pythia-70m --revision step1000 --revision step2000 --keep none
    torchrun --nproc-per-node 8 -m ihprobe scan runs/demo --device cuda
"""

from __future__ import annotations

from ihprobe.cli._common import add_quiet, any_int, device, positive_int, progress

SUMMARY_METRIC = "prefix_matching"


class _MetricNames:
    """The scan metrics of the metric table, looked up when the help is printed, so that
    building the parser stays free of torch."""

    def __str__(self) -> str:
        from ihprobe.probes.engine import SCAN_METRICS

        return ", ".join(SCAN_METRICS)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scan", help="score every head (prefix matching, LA, copying, ...) of checkpoints"
    )
    p.add_argument(
        "sources", nargs="+", metavar="SOURCE", help="checkpoint, run directory or hub id"
    )
    p.add_argument(
        "--revision",
        action="append",
        default=None,
        help="hub revision to scan (repeatable: each one is a checkpoint of every hub SOURCE)",
    )
    metrics = p.add_argument("--metrics", help="comma-separated names (default: all): %(names)s")
    metrics.names = _MetricNames()  # read from the metric table only when --help is shown
    p.add_argument("--out", default="scan", help="output directory")
    p.add_argument(
        "-n",  # the form torchrun passes on: it reads --n as an abbreviation of its own flags
        "--n",
        type=positive_int,
        help="half-length of the repeated tokens (default min(50, n_ctx/2))",
    )
    p.add_argument("--batch", type=positive_int, default=100, help="probe rows")
    p.add_argument("--seed", type=any_int, default=0, help="seed of the probe inputs")
    p.add_argument("--chunk", type=positive_int, help="rows per forward pass (bounds memory)")
    p.add_argument("--bos", action="store_true", help="prepend the tokenizer's BOS to probe rows")
    p.add_argument("--text", help="text file for the ICL score (skipped without it)")
    p.add_argument("--device", type=device, default="cpu",
                   help="where models go; under torchrun, cuda is each rank's own GPU")  # fmt: skip
    p.add_argument(
        "--keep",
        choices=("all", "none"),
        default="all",
        help="none: remove each hub revision from the HF cache once it is scanned",
    )
    p.add_argument("--top", type=positive_int, default=3, help="heads listed per checkpoint")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import pandas as pd

    from ihprobe.cli._common import read_text_option, refuse_overwrite
    from ihprobe.core.files import atomic_write
    from ihprobe.core.world import is_main_process, join_world
    from ihprobe.dynamics.trajectories import scan_checkpoints
    from ihprobe.figures.heads import checkpoint_slider, head_heatmap
    from ihprobe.figures.report import Section, write_report
    from ihprobe.io.sources import sources_of
    from ihprobe.probes.battery import check_metrics

    check_metrics(args.metrics)  # before any model is loaded
    out = Path(args.out)
    targets = [out / "scores.csv", out / "heatmaps.html"]
    refuse_overwrite(targets, args.force)
    text = read_text_option(args.text)
    kwargs = {"n": args.n, "batch": args.batch, "seed": args.seed, "bos": args.bos,
              "text": text, "chunk": args.chunk}  # fmt: skip
    frames, last, sections = [], [], []
    with join_world(args.device):  # one torchrun job for all sources
        for source in args.sources:
            ckpts = sources_of(source, args.revision or None)
            found = scan_checkpoints(
                ckpts,
                args.metrics,
                progress=progress(args),
                device=args.device,
                keep=args.keep,
                **kwargs,
            )
            for scores, duplicate in found:
                frames.append(scores.to_frame().assign(duplicate_of=duplicate))
            last.append(found[-1])
            series = [scores for scores, _ in found]
            if series[-1].head:  # several checkpoints: one heatmap per metric with a slider
                figure = (
                    checkpoint_slider if len(series) > 1 else lambda s, m: head_heatmap(s[-1], m)
                )
                blocks = [figure(series, metric) for metric in series[-1].head]
                sections.append(Section(_label(series[-1]), blocks))
    if not is_main_process():
        return 0  # rank 0 writes and prints what all ranks scanned
    table = pd.concat(frames, ignore_index=True)
    atomic_write(targets[0], lambda tmp: table.to_csv(tmp, index=False))
    write_report(targets[1], "ihprobe scan: head scores", sections)
    for scores, duplicate in last:
        _print_summary(scores, duplicate, args.top)
    for name in table["duplicate_of"].dropna().unique():
        print(f"note: checkpoints with the same weights as {name} (column duplicate_of)")
    print(f"wrote {targets[0]} ({len(table)} rows) and {targets[1]}")
    return 0


def _print_summary(scores, duplicate: str | None, top: int) -> None:
    print(_label(scores) + (f" (same weights as {duplicate})" if duplicate else ""))
    metric = SUMMARY_METRIC if SUMMARY_METRIC in scores.head else next(iter(scores.head), None)
    if metric is not None:
        heads = ", ".join(f"L{layer}H{h} {v:.3f}" for layer, h, v in scores.top_heads(metric, top))
        print(f"  top {metric}: {heads}")
    for name, value in scores.model.items():
        print(f"  {name}: {value:.4g}")
    for note in scores.settings.get("notes", []):
        print(f"  note: {note}")


def _label(scores) -> str:
    where = [scores.model_name]
    if scores.revision:
        where.append(scores.revision)
    if scores.step is not None:
        where.append(f"step {scores.step}")
    if scores.tokens is not None:
        where.append(f"{scores.tokens:,} tokens")
    return " · ".join(where)
