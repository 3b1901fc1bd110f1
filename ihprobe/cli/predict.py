"""``ihprobe predict -B 16 -C 64 [--law sqrt] [--json]``: when the law expects induction heads."""

from __future__ import annotations

import json

from ihprobe.cli._common import finite_float, positive_float, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="predict the updates and tokens at which induction heads emerge"
    )
    p.add_argument("-B", "--batch-size", dest="batch_size", type=positive_int, required=True,
                   help="sequences per optimiser update")  # fmt: skip
    p.add_argument("-C", "--context", type=positive_int, required=True,
                   help="tokens per sequence")  # fmt: skip
    p.add_argument("--law", choices=("fitted", "sqrt"), default="fitted",
                   help="fitted: U = T / (B^b C^c), T=750000, b=0.37, c=0.62; "
                   "sqrt: N = 10^5.7 sqrt(B C) tokens")  # fmt: skip
    p.add_argument("--T", dest="T", type=positive_float, help="override the law's constant")
    p.add_argument("--b", type=finite_float, help="override the batch-size exponent")
    p.add_argument("--c", type=finite_float, help="override the context exponent")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.dynamics.law import predict_emergence

    p = predict_emergence(args.batch_size, args.context, args.law, T=args.T, b=args.b, c=args.c)
    if args.json:
        print(json.dumps(p.to_dict(), indent=2))
    else:
        print(
            f"B={p.batch_size} C={p.context}: induction heads expected after about "
            f"{p.updates:,.0f} updates = {p.tokens:,.0f} tokens "
            f"(law {p.law.name}: U = {p.law.T:,.0f} / (B^{p.law.b:g} C^{p.law.c:g}))"
        )
    return 0
