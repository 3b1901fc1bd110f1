"""``ihprobe data-stats``: where a corpus or producer sits on the repetition x reliability map.

ihprobe data-stats --producer semi-natural --repetition 0.9 --reliability 0.5 --json
ihprobe data-stats --producer natural --text PATH --vocab-size 512
"""

from __future__ import annotations

import json

from ihprobe.cli import _common as flags
from ihprobe.cli import _text as text_flag

TOKEN_LIMIT = 10**9  # tokens measured at most (batches x batch size x context)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "data-stats",
        help="realised repetition, reliability, entropies and Zipf exponent of a token stream",
    )
    p.add_argument("--producer", default="natural", help="natural, bi-induct, semi-natural, ...")
    text_flag.add_text(p, "natural-text producers", default="the producer's corpus")
    p.add_argument("--dataset", help="HF dataset name or local data file (default: none)")
    p.add_argument("--tokenizer", help="HF tokenizer directory (default: train a BPE)")
    p.add_argument("-C", "--context", type=flags.positive_int, default=64, help="window length")
    p.add_argument("-B", "--batch-size", type=flags.positive_int, default=64, help="rows per batch")
    p.add_argument("--batches", type=flags.positive_int, default=16, help="batches to measure")
    p.add_argument(
        "--total-steps", type=flags.positive_int, default=1, help="anneal length (bi-induct)"
    )
    flags.add_seed(p, "producer seed")
    flags.add_option_flag(p, "a producer option")
    flags.add_json(p)
    flags.add_quiet(p, "no stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.core.errors import IhprobeError
    from ihprobe.data import make_producer
    from ihprobe.data.stats import producer_stats

    measured = args.batches * args.batch_size * args.context
    if measured > TOKEN_LIMIT:
        raise IhprobeError(
            f"--batches x --batch-size x --context = {measured:,} tokens, more than "
            f"{TOKEN_LIMIT:,}; the statistics settle long before: pass smaller values."
        )

    options = {"text": args.text, "dataset": args.dataset, "tokenizer": args.tokenizer}
    options = {k: v for k, v in options.items() if v is not None} | flags.producer_options(args)
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
