"""``ihprobe fit-law RUN_DIR... [--b 0.37] [--json]``: refit the emergence law to your runs."""

from __future__ import annotations

import json

from ihprobe.cli import _common as flags
from ihprobe.cli.emergence import add_point_options, point_kwargs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fit-law", help="refit U = T / (B^b C^c) to the emergence points of several runs"
    )
    p.add_argument("runs", nargs="+", type=flags.source, metavar="RUN_DIR", help="run directories")
    add_point_options(p)
    p.add_argument(
        "--b",
        type=flags.finite_float,
        help="fix the batch-size exponent instead of fitting it (default: fitted)",
    )
    p.add_argument(
        "--c",
        type=flags.finite_float,
        help="fix the context exponent instead of fitting it (default: fitted)",
    )
    flags.add_json(p)
    flags.add_quiet(p, "no stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    import re

    from ihprobe.core.errors import IhprobeError
    from ihprobe.dynamics.changepoint import run_emergence
    from ihprobe.dynamics.law import fit_law

    points = [run_emergence(r, **point_kwargs(args)) for r in args.runs]
    unknown = [p.model for p in points if not (p.batch_size and p.context)]
    if unknown:
        raise IhprobeError(
            f"{unknown[0]} does not record its batch size and context (no run.json); "
            "fit_law needs runs written by ihprobe train."
        )
    try:
        fit = fit_law(points, b=args.b, c=args.c)
    except IhprobeError as err:  # the library names its keyword; here the flag does that job
        raise IhprobeError(
            re.sub(r"fit_law\(points, (\w)=([\d.]+)\)", r"--\1 \2", str(err))
        ) from None
    if args.json:
        print(json.dumps({**fit.to_dict(), "runs": [p.to_dict() for p in points]}, indent=2))
        return 0
    free = [f"{k} SE {fit.stderr[k]:.3f}" for k in "bc" if k not in fit.fixed]
    quality = (
        f"r = {fit.r:.3f}, {', '.join(free) or 'both exponents fixed'}"
        if fit.residual_dof > 0
        else "an exact fit (as many runs as free parameters): no error estimate, add runs"
    )
    censored = (
        f", {fit.censored} censored (no placed point: each kept as a lower bound, Tobit fit)"
        if fit.censored
        else ""
    )
    print(
        f"U = {fit.T:,.0f} / (B^{fit.b:.3f} C^{fit.c:.3f})   {quality}   "
        f"({len(fit.points)} runs{censored}; [A]: T=750,000, b=0.37, c=0.62)"
    )
    print(fit.to_frame().to_string(index=False))
    return 0
