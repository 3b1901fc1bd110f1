"""``ihprobe weight-trajectory SOURCE... | --suite NAME``: weight-only head scores (OV copying,
the strongest Q/K/V composition into each head) at every checkpoint, reading only the tensors
they use and building no model (:func:`ihprobe.weight_trajectory`).

Writes ``OUT/weights.csv`` (the one long CSV shape, with ``duplicate_of`` and ``repeats``) and
prints the top heads of the last checkpoint for each metric.

    ihprobe weight-trajectory --suite pythia --suite-option size=160m --every 10
    ihprobe weight-trajectory runs/demo --metrics copying,k_composition_max --out weights/demo
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli._suite import add_sources_or_suite

FILE = "weights.csv"


class _MetricNames:
    """The weight-only metrics, looked up when the help is printed (building the parser stays
    free of torch)."""

    def __str__(self) -> str:
        from ihprobe.dynamics.weight_series import WEIGHT_METRICS

        return ", ".join(WEIGHT_METRICS)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "weight-trajectory",
        help="weight-only head scores (copying, composition) over checkpoints; reads few tensors",
    )
    add_sources_or_suite(p, out="weights")
    metrics = p.add_argument(
        "--metrics", default="copying", help="comma-separated names: %(names)s"
    )
    metrics.names = _MetricNames()
    flags.add_draws(p, "random-matrix draws of the composition baseline", default="50")
    p.add_argument("--no-cache", dest="cache", action="store_false", help="recompute everything")
    flags.add_show(p, "heads listed per metric")
    flags.add_threads(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import pandas as pd

    from ihprobe.cli._suite import suite_of
    from ihprobe.core.files import atomic_write
    from ihprobe.dynamics.weight_series import weight_trajectory
    from ihprobe.io.provenance import csv_table
    from ihprobe.jobs.scan import checkpoint_name, repeat_notes

    target = Path(args.out) / FILE
    flags.refuse_overwrite([target], args.force)
    suite = suite_of(args)
    options = {"draws": args.draws} if args.draws is not None else {}
    table = weight_trajectory(
        suite or args.sources,
        [m.strip() for m in args.metrics.split(",")],
        revisions=None if suite else args.revision,
        cache=args.cache,
        progress=flags.progress(args),
        **options,
    )
    written = csv_table(table)
    atomic_write(target, lambda tmp: written.to_csv(tmp, index=False))
    # one key per checkpoint; a local source has no revision (NaN), which the f-string keeps
    key = pd.Series(
        [f"{m}|{r}|{s}" for m, r, s in zip(table.model, table.revision, table.step, strict=True)]
    )
    last = table[(key == key.iloc[-1]).to_numpy()]
    print(checkpoint_name(last.iloc[0]))
    for metric, rows in last.groupby("metric", sort=False):
        top = rows.dropna(subset=["value"]).nlargest(args.show, "value")
        heads = ", ".join(f"L{r.layer}H{r.head} {r.value:.3f}" for r in top.itertuples())
        print(f"  top {metric}: {heads}")
    for name in table["duplicate_of"].dropna().unique():
        print(f"note: checkpoints with the same tensors as {name} (column duplicate_of)")
    for name, said in repeat_notes(table):
        print(f"note: {name}: {said} (column repeats)")
    print(f"wrote {target} ({len(written)} rows)")
    return 0
