"""``ihprobe scan SOURCE...``: score every head of one or more checkpoints.

Writes ``OUT/scores.csv`` (the one long CSV shape, one block per checkpoint, with
``duplicate_of`` naming an earlier checkpoint of identical weights, ``repeats`` the shards or
tensors that repeat an earlier checkpoint's) and ``OUT/heatmaps.html`` (a
heatmap per head metric of each source, with a slider over the checkpoints of a run or several
revisions), and prints the top heads of each source's last checkpoint; the work is
:func:`ihprobe.jobs.scan.scan_job`. A run directory is swept checkpoint by checkpoint. Under
``torchrun --nproc-per-node N`` each rank scans every N-th checkpoint and rank 0 writes.

    ihprobe scan runs/demo --metrics prefix_matching,ar_accuracy --out scans/demo
    ihprobe scan EleutherAI/pythia-70m --revision step1000 --revision step2000 --keep none
    ihprobe scan runs/demo --attention patterns        # whole patterns, as the viewer reads them
    ihprobe scan runs/demo --metrics prefix_matching,fv --task antonyms.tsv  # FV heads too
    ihprobe scan --suite pythia --suite-option size=160m --every 10 --keep none

Each checkpoint's scores are recorded in the results cache (``$IHPROBE_CACHE``) once scanned,
under its weights hash and every setting, so a rerun or an interrupted series reads them there
instead of fetching again (offline too); ``--no-cache`` scans everything again.
    torchrun --nproc-per-node 8 -m ihprobe scan runs/demo --device cuda
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli import _text as text_flag
from ihprobe.cli._suite import add_sources_or_suite

SUMMARY_METRIC = "prefix_matching"


class _MetricNames:
    """The scan metrics of the metric table, looked up when the help is printed, so that
    building the parser stays free of torch."""

    def __str__(self) -> str:
        from ihprobe.probes.metrics import SCAN_METRICS

        return ", ".join(SCAN_METRICS)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scan", help="score every head (prefix matching, LA, copying, ...) of checkpoints"
    )
    add_sources_or_suite(p, out="scan")
    metrics = p.add_argument(
        "--metrics",
        help="comma-separated names (default: all; `ihprobe metrics` says what each measures, "
        "its chance level and direction): %(names)s",
    )
    metrics.names = _MetricNames()  # read from the metric table only when --help is shown
    flags.add_probe_rows(p)
    p.add_argument(
        "--chunk",
        type=flags.positive_int,
        help="rows per forward pass, bounds memory (default: 25)",
    )
    text_flag.add_text(p)
    p.add_argument(
        "--task",
        action="append",
        default=None,
        help="fv's task file of (x, y) pairs, repeatable (default: the built-in tasks; fv is "
        "computed only when --metrics names it)",
    )
    flags.add_model_flags(p)
    flags.add_placement(p)
    p.add_argument(
        "--attention",
        choices=("auto", "pairs", "patterns"),
        default="auto",
        help="attention scores from (query, key) pairs without whole patterns (pairs; auto: "
        "where the architecture allows, else patterns) or from whole patterns (default: auto)",
    )
    p.add_argument(
        "--keep",
        choices=("all", "none"),
        default="all",
        help="none: remove each hub revision this series downloaded from the HF cache once it "
        "is scanned (its scores stay in the results cache: a rerun, or an interrupted series, "
        "fetches only the revisions not yet scanned)",
    )
    p.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="scan every checkpoint again and record nothing in the results cache",
    )
    flags.add_show(p, "heads listed per source")
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.probes.metrics import check_metrics

    text = text_flag.read_text_option(args.text)  # before heavy imports: a FIFO is refused at once
    check_metrics(args.metrics)  # before heavy imports and any model
    tasks = None
    if args.task:  # every task file read and checked before any model loads
        from ihprobe.causal.tasks import read_task

        tasks = [read_task(t) for t in args.task]

    from ihprobe.cli._suite import suite_of
    from ihprobe.jobs.scan import FILES, repeat_notes, scan_job
    from ihprobe.probes.engine import DEFAULT_CHUNK

    flags.refuse_overwrite([Path(args.out) / name for name in FILES], args.force)
    placed = flags.placement(args)
    if placed:  # refused in one line before any checkpoint is read
        from ihprobe.io.offload import placement

        placement(placed["device_map"], placed["max_memory"])
    suite = suite_of(args)
    done = scan_job(
        [suite] if suite else args.sources,
        args.out,
        metrics=args.metrics,
        revisions=args.revision,
        device=args.device,
        dtype=args.dtype,
        keep=args.keep,
        progress=flags.progress(args),
        n=args.n,
        batch=args.batch,
        seed=args.seed,
        bos=args.bos,
        text=text,
        chunk=args.chunk or DEFAULT_CHUNK,
        attention=args.attention,
        tasks=tasks,
        placement=placed or None,
        cache=args.cache,
    )
    if not done.files:
        return 0  # a torchrun rank other than 0: rank 0 writes and prints
    for scores, duplicate in done.last:
        _print_summary(scores, duplicate, args.show)
    for name in done.table["duplicate_of"].dropna().unique():
        print(f"note: checkpoints with the same weights as {name} (column duplicate_of)")
    for revision, said in repeat_notes(done.table):
        print(f"note: {revision}: {said} (column repeats)")
    print(f"wrote {done.files[0]} ({len(done.table)} rows) and {done.files[1]}")
    return 0


def _print_summary(scores, duplicate: str | None, top: int) -> None:
    print(scores.provenance.label + (f" (same weights as {duplicate})" if duplicate else ""))
    metric = SUMMARY_METRIC if SUMMARY_METRIC in scores.head else next(iter(scores.head), None)
    if metric is not None:
        heads = ", ".join(f"L{layer}H{h} {v:.3f}" for layer, h, v in scores.top_heads(metric, top))
        print(f"  top {metric}: {heads}{flags.chance_text(scores, metric)}")
    for note in flags.fixed_offset_notes(scores):
        print(f"  note: {note}")
    for name, value in scores.model.items():
        print(f"  {name}: {value:.4g}{flags.chance_text(scores, name)}")
    for note in scores.settings.get("notes", []):
        print(f"  note: {note}")
