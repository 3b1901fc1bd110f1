"""``ihprobe ablate SOURCE...``: top heads (per layer or global) against random baselines.

A run directory is ablated at its last checkpoint; ``--all-checkpoints`` ablates each one.
Writes ``OUT/ablation.csv`` (the one long CSV shape: :meth:`ihprobe.AblationResult.to_frame` with
each statistic in the ``statistic`` column, one block per checkpoint) and ``OUT/report.html``
(method, head sets, per-metric charts, the numbers). With ``--over-training``
the table is :func:`ihprobe.ablation_trajectory`'s (load-bearing index and per-head effects at
every checkpoint, cached by weights hash) and the report shows them over training.

    ihprobe ablate runs/demo --out ablation/demo --metrics ar_accuracy,induction_loss
    ihprobe ablate path/to/checkpoint --scope global --top 1 --baseline score-matched
    ihprobe ablate runs/demo --over-training --scope global --top 1 --mode pattern
"""

from __future__ import annotations

from ihprobe.causal.choices import (  # torch-free
    BASELINES,
    DEFAULT_BASELINE,
    DEFAULT_SCOPE,
    DEFAULT_TOP,
    MODES,
    OTHER_ANALYSES,
    SCOPES,
    analysis,
)
from ihprobe.cli import _common as flags
from ihprobe.cli import _text as text_flag


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ablate",
        help="ablate the top heads vs random heads; CSV + HTML report",
        description="By default the model's 3 heads that score highest on --by, none at "
        "chance, against layer-matched random draws (the demo's rule); [B]'s per-layer "
        "protocol is --scope layer --top 0.02.",
    )
    flags.add_sources(p, out="ablation")
    flags.add_all_checkpoints(p)
    p.add_argument(
        "--over-training",
        action="store_true",
        help="every checkpoint of a run: load-bearing index and per-head effects over training",
    )
    p.add_argument("--by", default="prefix_matching", help="head score that ranks heads")
    p.add_argument(
        "--top",
        type=flags.fraction_or_count,
        default=DEFAULT_TOP,
        help="fraction of heads (0.02) or a count (1) in the top set",
    )
    p.add_argument(
        "--heads",
        help="test these heads instead of a top set, e.g. L1H3,L1H0 or 1.3,1.0 (default: none)",
    )
    p.add_argument(
        "--scope",
        choices=SCOPES,
        default=DEFAULT_SCOPE,
        help="global: the top heads of the whole model, none at chance; layer: [B]'s top of "
        "every layer, noting heads without the signature",
    )
    flags.add_draws(p, "random draws of the baseline")
    p.add_argument("--baseline", choices=BASELINES, default=DEFAULT_BASELINE, help="random heads")
    p.add_argument("--mode", choices=MODES, default="mean", help="what ablated heads output")
    p.add_argument("--metrics", help="comma-separated metrics (default: all the model can run)")
    flags.add_probe_rows(p)
    text_flag.add_text(p, "ICL score and natural loss", "ihprobe's built-in text")
    p.add_argument(
        "--task",
        action="append",
        default=None,
        help="task file of (x, y) pairs, repeatable (default: none)",
    )
    flags.add_model_flags(p)
    flags.add_placement(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Check the flags, then one library call: an ablation per source, or over training. (Over
    60 lines: the lazy imports and the keyword table it passes on, one line per flag.)"""
    from pathlib import Path

    text = text_flag.read_text_option(args.text)  # before heavy imports: a FIFO is refused at once

    import pandas as pd

    from ihprobe.causal.ablation import check_settings
    from ihprobe.core.errors import IhprobeError
    from ihprobe.core.files import atomic_write
    from ihprobe.core.heads import heads_of
    from ihprobe.dynamics.trajectories import ablate_checkpoints
    from ihprobe.figures.ablation import write_ablation_report
    from ihprobe.io.provenance import csv_table
    from ihprobe.probes.metrics import HEAD_METRICS

    metrics = args.metrics.split(",") if args.metrics else None
    heads = heads_of(args.heads, "--heads") if args.heads is not None else None
    check_settings(
        top=args.top,
        random=args.draws,
        mode=args.mode,
        metrics=metrics,
        scope=args.scope,
        baseline=args.baseline,
    )
    if args.by not in HEAD_METRICS:
        raise IhprobeError(
            f"unknown head score --by {args.by}; choose one of {list(HEAD_METRICS)}."
        )
    if args.over_training and args.all_checkpoints:
        raise IhprobeError(
            "--over-training already takes every checkpoint; drop --all-checkpoints."
        )
    if args.over_training and args.dtype != "float32":
        raise IhprobeError("--over-training caches float32 results; drop --dtype.")
    from ihprobe.causal.tasks import read_task

    for task in args.task or ():  # every task file read and checked before any model loads
        read_task(task)
    placed = flags.placement(args)
    if placed:  # refused in one line before any checkpoint is read
        from ihprobe.io.offload import placement

        placement(placed["device_map"], placed["max_memory"])
    out = Path(args.out)
    targets = [out / "ablation.csv", out / "report.html"]
    flags.refuse_overwrite(targets, args.force)
    kwargs = {
        "by": args.by,
        "top": args.top,
        "heads": heads,
        "scope": args.scope,
        "draws": args.draws,
        "baseline": args.baseline,
        "mode": args.mode,
        "metrics": metrics,
        "seed": args.seed,
        "n": args.n,
        "batch": args.batch,
        "bos": args.bos,
        "text": text,
        "tasks": args.task,
    }
    if args.over_training:
        return _over_training(args, kwargs, targets)
    where = {"progress": flags.progress(args), "device": args.device, "dtype": args.dtype}
    where["placement"] = placed or None
    results = [
        result
        for source in args.sources  # one skeleton per source
        for result in ablate_checkpoints(flags.checkpoints_of(args, source), **where, **kwargs)
    ]
    frame = csv_table(pd.concat([r.to_frame() for r in results], ignore_index=True))
    atomic_write(targets[0], lambda tmp: frame.to_csv(tmp, index=False))
    write_ablation_report(targets[1], results)
    for result in results:
        _print_summary(result)
    print(f"wrote {targets[0]} ({len(frame)} rows) and {targets[1]}")
    return 0


def _over_training(args, kwargs: dict, targets) -> int:
    """``--over-training``: ablation_trajectory, its table and the over-training report."""
    from ihprobe.core.errors import IhprobeError
    from ihprobe.core.files import atomic_write
    from ihprobe.dynamics.ablation_series import ablation_trajectory
    from ihprobe.figures.ablation_series import write_trajectory_report
    from ihprobe.io.provenance import csv_table
    from ihprobe.io.sources import sources_of

    found = sources_of(args.sources, args.revision or None)
    if len(found) < 2:  # a trajectory of one point says nothing over training
        raise IhprobeError(
            f"--over-training needs at least two checkpoints; {found[0].label} is one: drop "
            "--over-training to ablate it, or pass a run folder or several --revision."
        )
    table = ablation_trajectory(
        found,  # the revisions are in them
        progress=flags.progress(args),
        device=args.device,
        **flags.placement(args),
        **kwargs,
    )
    atomic_write(targets[0], lambda tmp: csv_table(table).to_csv(tmp, index=False))
    write_trajectory_report(targets[1], table, by=args.by)
    print(f"wrote {targets[0]} ({len(table)} rows) and {targets[1]}")
    return 0


def _print_summary(result) -> None:
    top = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
    where = f" step {result.step}" if result.step is not None else ""
    print(f"{result.model_name}{where}: top set {top}")
    for note in result.settings.get("notes", []):
        print(f"  note: {note}")
    repeat = result.settings.get("draws_repeat")
    for row in result.summary().itertuples():
        if ":" not in row.metric:
            distinct = f" ({_shown(row.p_distinct)} over {row.distinct_sets} distinct sets)"
            print(
                f"  {row.metric}: clean {row.clean:.4g}, top change {row.change:+.3g}, "
                f"random {row.random_change_mean:+.3g} [{row.random_change_lo:+.3g}, "
                f"{row.random_change_hi:+.3g}], p {_shown(row.p_value)}"
                + (distinct if repeat else "")
                + f", load-bearing index {_shown(row.load_bearing_index)} "
                f"[{_shown(row.load_bearing_lo)}, {_shown(row.load_bearing_hi)}]"
            )
            for reason in _nan_reasons(row):
                print(f"    nan: {reason}")
    draws = len(result.random_heads)
    others = "; ".join(f"{name}: {flags}" for name, flags in OTHER_ANALYSES.items())
    print(
        f"  analysis: {analysis(result.settings, result.by, draws)}; others can differ "
        f"({others}; the demo's report shows them side by side)"
    )
    print(f"  verdict: {result.verdict()}")


def _shown(value: float) -> str:
    return f"{value:.3g}"


def _nan_reasons(row) -> list[str]:
    """Why a number of a summary row is NaN, one reason per kind."""
    reasons = []
    if row.change != row.change:  # NaN: the clean or ablated value itself is undefined
        reasons.append(f"{row.metric} is undefined on the clean or ablated model")
    elif row.p_value != row.p_value:
        reasons.append("no random draw has a defined change, so there is no p")
    if row.load_bearing_index != row.load_bearing_index and row.change == row.change:
        if row.distinct_sets < 2:
            reasons.append("one distinct random set: the index needs the spread of two or more")
        else:
            reasons.append(
                f"every random set and the top set changed {row.metric} alike "
                f"({row.change:+.3g}): the index divides by a spread of 0"
            )
    elif row.load_bearing_lo != row.load_bearing_lo and row.change == row.change:
        reasons.append("every resample of the random sets has no spread: no interval")
    return reasons
