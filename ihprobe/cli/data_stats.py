"""``ihprobe data-stats``: where a corpus or producer sits on the repetition x reliability map.

ihprobe data-stats --producer semi-natural --repetition 0.9 --reliability 0.5 --json
ihprobe data-stats --producer natural --text PATH --vocab-size 512
"""

from __future__ import annotations

import json


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "data-stats",
        help="realised repetition, reliability, entropies and Zipf exponent of a token stream",
    )
    p.add_argument("--producer", default="natural", help="natural, bi-induct, semi-natural, ...")
    p.add_argument("--text", help="text file, directory or glob (natural-text sources)")
    p.add_argument("--dataset", help="HF dataset name or local data file")
    p.add_argument("--tokenizer", help="HF tokenizer directory (default: train a BPE)")
    p.add_argument("--vocab-size", type=int, help="vocabulary size (BPE or synthetic)")
    p.add_argument("--repetition", type=float, help="p_a for semi-natural / markov")
    p.add_argument("--reliability", type=float, help="p_b for semi-natural / markov")
    p.add_argument("--context", type=int, default=64, help="window length (default 64)")
    p.add_argument("--batch-size", type=int, default=64, help="rows per batch (default 64)")
    p.add_argument("--batches", type=int, default=16, help="batches to measure (default 16)")
    p.add_argument("--total-steps", type=int, default=1, help="anneal length (bi-induct)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other producer option; VALUE is parsed as JSON when it can be",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.data import make_producer
    from ihprobe.data.stats import producer_stats
    from ihprobe.errors import IhprobeError

    options = {
        "text": args.text,
        "dataset": args.dataset,
        "tokenizer": args.tokenizer,
        "vocab_size": args.vocab_size,
        "repetition": args.repetition,
        "reliability": args.reliability,
    }
    options = {k: v for k, v in options.items() if v is not None}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise IhprobeError(f"--option {item!r}: write KEY=VALUE, e.g. --option m0=0.3")
        try:
            options[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            options[key.replace("-", "_")] = value
    producer = make_producer(
        args.producer,
        batch_size=args.batch_size,
        context=args.context,
        seed=args.seed,
        total_steps=args.total_steps,
        **options,
    )
    stats = producer_stats(producer, batches=args.batches)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(
            "\n".join(
                f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}" for k, v in stats.items()
            )
        )
    return 0
