"""``ihprobe predict -B 16 -C 64 [--law sqrt] [--json]``: when the law expects induction heads."""

from __future__ import annotations

import json

from ihprobe.cli import _common as flags


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="predict the updates and tokens at which induction heads emerge"
    )
    p.add_argument(
        "-B",
        "--batch-size",
        dest="batch_size",
        type=flags.positive_int,
        required=True,
        help="sequences per optimiser update",
    )
    p.add_argument(
        "-C", "--context", type=flags.positive_int, required=True, help="tokens per sequence"
    )
    p.add_argument(
        "--law",
        choices=("fitted", "sqrt"),
        default="fitted",
        help="fitted: U = T / (B^b C^c), T=750000, b=0.37, c=0.62; "
        "sqrt: N = 10^5.7 sqrt(B C) tokens",
    )
    p.add_argument(
        "--T",
        dest="T",
        type=flags.positive_float,
        help="override the law's constant (default: the law's)",
    )
    p.add_argument(  # not -B's batch size: --b stays as the short spelling
        "--b-exponent",
        "--b",
        dest="b",
        type=flags.finite_float,
        help="override the batch-size exponent b (default: the law's)",
    )
    p.add_argument(
        "--c-exponent",
        "--c",
        dest="c",
        type=flags.finite_float,
        help="override the context exponent c (default: the law's)",
    )
    flags.add_json(p)
    flags.add_quiet(p, "no stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    import math

    from ihprobe.core.errors import IhprobeError
    from ihprobe.dynamics.law import predict_emergence

    try:
        p = predict_emergence(args.batch_size, args.context, args.law, T=args.T, b=args.b, c=args.c)
        finite = all(math.isfinite(v) for v in (p.updates, p.tokens)) and p.updates >= 1
    except (OverflowError, ZeroDivisionError):
        finite = False
    if not finite:
        raise IhprobeError(
            f"B={args.batch_size} C={args.context} with these law values gives no finite "
            "number of updates of at least 1; choose smaller exponents (--b, --c) or "
            "a smaller --T, -B or -C."
        )
    if args.json:
        print(json.dumps(p.to_dict(), indent=2))
    else:
        print(
            f"B={p.batch_size} C={p.context}: induction heads expected after about "
            f"{p.updates:,.0f} updates = {p.tokens:,.0f} tokens "
            f"(law {p.law.name}: U = {p.law.T:,.0f} / (B^{p.law.b:g} C^{p.law.c:g}))"
        )
    return 0
