"""Validation of the emergence law at toy scale on CPU (README "Validation"; not a test).

Trains tiny 2-layer GPT-NeoX models on rows of random tokens that repeat with a period drawn
per row from 8..32 (the producer of tests/test_emergence_e2e.py), over a small (B, C) grid and at
two widths, finds each run's emergence point (max prefix matching, 3-segment fit against
log tokens) and refits ``U = T / (B^b C^c)``. The learning rate is constant (3e-3), so the
emergence step does not depend on a run's budget; each run gets ``TOKENS`` training tokens.

Writes ``benchmarks/RESULTS_law.md``. Run from the repository root:
``.venv/bin/python benchmarks/validate_law.py [--tokens 1.5e6] [--checkpoints 16]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.test_emergence_e2e.Periodic

GRID = (  # (batch_size, context, d_model)
    (16, 64, 64),
    (32, 64, 64),
    (64, 64, 64),
    (32, 128, 64),
    (32, 64, 128),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=float, default=1.5e6, help="training tokens per run")
    parser.add_argument("--checkpoints", type=int, default=16, help="log-spaced, per run")
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-law"))
    args = parser.parse_args()

    import pandas as pd

    from ihprobe import data
    from ihprobe.dynamics.changepoint import run_emergence
    from ihprobe.dynamics.law import fit_law, predict_emergence
    from ihprobe.training.trainer import TrainConfig, train
    from tests.test_emergence_e2e import Periodic

    data.PRODUCERS["periodic"] = Periodic
    rows, points = [], []
    for B, C, width in GRID:
        started = time.perf_counter()
        config = TrainConfig(
            out=f"{args.out}/B{B}-C{C}-d{width}", producer="periodic", producer_options={},
            layers=2, heads=4, d_model=width, context=C, batch_size=B, tokens=int(args.tokens),
            lr=3e-3, schedule="constant", n_checkpoints=args.checkpoints, progress=False,
        )  # fmt: skip
        run = train(config)
        point = run_emergence(run, n=16, batch=50)
        rows.append(
            {
                "B": B,
                "C": C,
                "d_model": width,
                "updates": round(point.updates) if point.transition else "none",
                "bracket (updates)": (
                    f"{point.updates_low:.0f}-{point.updates_high:.0f}" if point.transition else ""
                ),
                "first PS >= 0.3 (step)": point.threshold_step,
                "[A] law (updates)": round(predict_emergence(B, C).updates),
                "train+probe s": round(time.perf_counter() - started),
            }
        )
        if width == 64:
            points.append(point)
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    lines = [
        "# Emergence law at toy scale (CPU)",
        "",
        "Command: `.venv/bin/python benchmarks/validate_law.py "
        f"--tokens {args.tokens:g} --checkpoints {args.checkpoints}`",
        "",
        "2-layer GPT-NeoX, 4 heads, vocab 128, rows of 32 random tokens repeating with a period",
        "drawn per row from 8..32; AdamW lr 3e-3 constant, grad clip 1; "
        f"{args.checkpoints} log-spaced checkpoints;",
        "emergence = start of the steep segment of a 3-segment fit of max PS against log tokens",
        "(probe: n=16, 50 rows).",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + " --- |" * len(table.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)),
        "",
    ]
    formed = [p for p in points if p.transition]
    try:
        fit = fit_law(formed)
        lines += [
            f"Refit over the {len(formed)} width-64 runs with a transition: "
            f"U = {fit.T:,.0f} / (B^{fit.b:.2f} C^{fit.c:.2f}), r = {fit.r:.3f} "
            f"(stderr b {fit.stderr['b']:.2f}, c {fit.stderr['c']:.2f}); [A]: b = 0.37, c = 0.62.",
        ]
    except Exception as err:  # noqa: BLE001 - report whatever was measured
        lines.append(f"No refit: {err}")
    out = Path(__file__).with_name("RESULTS_law.md")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
