"""``ihprobe data-stats``: where a corpus or producer sits on the repetition x reliability map.

ihprobe data-stats --producer semi-natural --repetition 0.9 --reliability 0.5 --json
ihprobe data-stats --producer natural --text PATH --vocab-size 512
"""

from __future__ import annotations

import json

from ihprobe.cli._common import add_option_flag, any_int, positive_int, probability


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "data-stats",
        help="realised repetition, reliability, entropies and Zipf exponent of a token stream",
    )
    p.add_argument("--producer", default="natural", help="natural, bi-induct, semi-natural, ...")
    p.add_argument("--text", help="text file, directory or glob (natural-text sources)")
    p.add_argument("--dataset", help="HF dataset name or local data file")
    p.add_argument("--tokenizer", help="HF tokenizer directory (default: train a BPE)")
    p.add_argument("--vocab-size", type=positive_int, help="vocabulary size (BPE or synthetic)")
    p.add_argument("--repetition", type=probability, help="p_a for semi-natural / markov")
    p.add_argument("--reliability", type=probability, help="p_b for semi-natural / markov")
    p.add_argument("--context", type=positive_int, default=64, help="window length")
    p.add_argument("--batch-size", type=positive_int, default=64, help="rows per batch")
    p.add_argument("--batches", type=positive_int, default=16, help="batches to measure")
    p.add_argument("--total-steps", type=positive_int, default=1, help="anneal length (bi-induct)")
    p.add_argument("--seed", type=any_int, default=0, help="producer seed")
    add_option_flag(p, "any other producer option")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.data import make_producer
    from ihprobe.data.stats import producer_stats

    options = {
        "text": args.text,
        "dataset": args.dataset,
        "tokenizer": args.tokenizer,
        "vocab_size": args.vocab_size,
        "repetition": args.repetition,
        "reliability": args.reliability,
    }
    options = {k: v for k, v in options.items() if v is not None} | dict(args.option)
    shape = {key: getattr(args, key) for key in ("batch_size", "context", "seed", "total_steps")}
    producer = make_producer(args.producer, **shape, **options)
    stats = producer_stats(producer, batches=args.batches)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        if options:  # what was asked for, beside what the producer delivered
            print("requested: " + ", ".join(f"{k}={v}" for k, v in sorted(options.items())))
        print("\n".join(_line(k, v) for k, v in stats.items()))
    return 0


def _line(key: str, value) -> str:
    """``key: value`` with the unit of entropies (bits, as ihprobe.data.stats computes them)."""
    if not isinstance(value, float):
        return f"{key}: {value}"
    unit = " bits" if key.endswith("entropy") else ""
    return f"{key}: {value:.4f}{unit}"
