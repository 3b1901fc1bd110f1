"""``ihprobe scan SOURCE...``: score every head of one or more checkpoints.

Writes ``OUT/scores.csv`` (the long table of :meth:`ihprobe.HeadScores.to_frame`, one block per
checkpoint) and ``OUT/heatmaps.html`` (a heatmap per head metric of each source's last
checkpoint), and prints the top heads. A run directory is swept checkpoint by checkpoint into
one skeleton (``load_weights``), with a progress bar.

    ihprobe scan runs/demo --metrics prefix_matching,ar_accuracy --out scans/demo
    ihprobe scan EleutherAI/pythia-70m --revision step1000 --revision step2000
"""

from __future__ import annotations

SUMMARY_METRIC = "prefix_matching"


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
    p.add_argument("--metrics", help="comma-separated metric names (default: all)")
    p.add_argument("--out", default="scan", help="output directory (default: ./scan)")
    p.add_argument(
        "--n", type=int, help="half-length of the repeated tokens (default min(50, n_ctx/2))"
    )
    p.add_argument("--batch", type=int, default=100, help="probe rows (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the probe inputs")
    p.add_argument("--chunk", type=int, help="rows per forward pass (bounds memory)")
    p.add_argument("--bos", action="store_true", help="prepend the tokenizer's BOS to probe rows")
    p.add_argument("--text", help="text file for the ICL score (skipped without it)")
    p.add_argument("--top", type=int, default=3, help="heads listed per checkpoint (default 3)")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def run(args) -> int:
    import dataclasses
    import os
    from pathlib import Path

    import pandas as pd
    from tqdm import tqdm

    from ihprobe import models
    from ihprobe.cli._common import read_text_option, refuse_overwrite
    from ihprobe.figures.heads import head_heatmap
    from ihprobe.probes.battery import check_metrics, scan
    from ihprobe.report import Section, write_report
    from ihprobe.trajectories import sources_of

    check_metrics(args.metrics)  # before any model is loaded
    out = Path(args.out)
    targets = [out / "scores.csv", out / "heatmaps.html"]
    refuse_overwrite(targets, args.force)
    text = read_text_option(args.text)
    plan = [(source, sources_of(source, args.revision or None)) for source in args.sources]
    total = sum(len(ckpts) for _, ckpts in plan)
    kwargs = {
        "n": args.n,
        "batch": args.batch,
        "seed": args.seed,
        "bos": args.bos,
        "text": text,
        "chunk": args.chunk,
    }

    frames, last = [], []
    with tqdm(total=total, desc="scan", unit="ckpt", disable=None) as bar:
        for _, ckpts in plan:
            model = None
            for ckpt in ckpts:
                bar.set_postfix_str(ckpt.label)
                model = models.load_or_swap(model, ckpt.source, revision=ckpt.revision)
                scores = scan(model, args.metrics, **kwargs)
                scores.provenance = dataclasses.replace(
                    scores.provenance,
                    step=scores.step if scores.step is not None else ckpt.step,
                    tokens=scores.tokens if scores.tokens is not None else ckpt.tokens,
                )
                frames.append(scores.to_frame())
                bar.update()
            last.append(scores)

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".scores.csv.{os.getpid()}.tmp"  # atomic: write aside, then rename
    pd.concat(frames, ignore_index=True).to_csv(tmp, index=False)
    os.replace(tmp, targets[0])
    sections = [
        Section(_label(s), [head_heatmap(s, metric) for metric in s.head]) for s in last if s.head
    ]
    write_report(targets[1], "ihprobe scan: head scores", sections)

    for scores in last:
        print(_label(scores))
        metric = SUMMARY_METRIC if SUMMARY_METRIC in scores.head else next(iter(scores.head), None)
        if metric is not None:
            heads = ", ".join(
                f"L{layer}H{h} {v:.3f}" for layer, h, v in scores.top_heads(metric, args.top)
            )
            print(f"  top {metric}: {heads}")
        for name, value in scores.model.items():
            print(f"  {name}: {value:.4g}")
        for note in scores.settings.get("notes", []):
            print(f"  note: {note}")
    print(f"wrote {targets[0]} ({sum(len(f) for f in frames)} rows) and {targets[1]}")
    return 0


def _label(scores) -> str:
    where = [scores.model_name]
    if scores.revision:
        where.append(scores.revision)
    if scores.step is not None:
        where.append(f"step {scores.step}")
    if scores.tokens is not None:
        where.append(f"{scores.tokens:,} tokens")
    return " · ".join(where)
