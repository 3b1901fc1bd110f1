"""``ihprobe metrics``: every metric, what it measures, its chance level, direction and source.

The glossary of :mod:`ihprobe.probes.glossary`; ``--markdown`` prints the page
``docs/methods/metrics.md`` renders from the same table.

    ihprobe metrics                   # chance levels in V, the vocabulary size, where they need it
    ihprobe metrics --vocab 50304     # every chance level computed at that vocabulary
    ihprobe metrics --markdown > docs/methods/metrics.md
"""

from __future__ import annotations

from ihprobe.cli import _common as flags


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "metrics",
        help="what every scan and ablation metric measures, its chance level and direction",
        description="Every metric ihprobe computes: what it measures, its chance level at the "
        "default probe (a model without induction), which way is better, and its source.",
    )
    p.add_argument(
        "--vocab",
        type=flags.positive_int,
        metavar="V",
        help="compute the chance levels that depend on the vocabulary size at V (default: "
        "none, their formula in V)",
    )
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    flags.add_quiet(p)  # the command's grammar; it shows no bars or stages either way
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.probes.glossary import SOURCES, glossary_rows, markdown

    if args.markdown:
        print(markdown(args.vocab), end="")
        return 0
    for row in glossary_rows(args.vocab):
        print(
            f"{row.name} ({row.level}; {row.direction} is better; chance {row.chance}; "
            f"{row.source})\n    {row.measures}"
        )
    print("\nchance: at the default probe (n = 50, |S| = 20, varied |S| 10-30); V: vocabulary size")
    print("; ".join(f"{key}: {title}" for key, title in SOURCES.items()))
    return 0
