"""Validation of the emergence law at toy scale on CPU (README "Validation"; not a test).

Trains tiny 2-layer GPT-NeoX models on rows of random tokens that repeat with a period drawn
per row from 8..32 (the producer of tests/test_emergence_e2e.py), over a small (B, C) grid and at
two widths, finds each run's emergence point (max prefix matching, 3-segment fit against
log tokens) and refits ``U = T / (B^b C^c)`` by the shared rules of ``verdicts.py``: least
squares on the cells (one seed each) with a t-interval on df = cells - parameters (here 4 - 3
= 1), judged against [A]'s exponents +- 0.15. The learning rate is constant (3e-3), so the
emergence step does not depend on a run's budget; each run gets ``TOKENS`` training tokens.

Appends its rows to ``RESULTS_law.csv`` beside it (one block per ``--checkpoints`` setting) and
writes ``RESULTS_law.md`` from it. Run from the repository root:
``.venv/bin/python -m studies toy_law [--tokens 1.5e6] [--checkpoints 16]``;
``--report`` only rewrites the markdown from the CSV.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import pandas as pd

from ihprobe.dynamics.law import cell_means_fit
from ihprobe.dynamics.verdicts import equal, judge
from ihprobe.jobs.grid import markdown
from studies.study import ROOT
from studies.toy_law.periodic import Periodic

OUT_MD, OUT_CSV = (
    Path(__file__).with_name("RESULTS_law.md"),
    Path(__file__).with_name("RESULTS_law.csv"),
)
CLAIMS = {"b": equal(0.37, 0.15), "c": equal(0.62, 0.15)}  # [A]'s exponents +- 0.15

GRID = (  # (batch_size, context, d_model)
    (16, 64, 64),
    (32, 64, 64),
    (64, 64, 64),
    (32, 128, 64),
    (32, 64, 128),
)


def train_grid(tokens: float, checkpoints: int, out: str) -> pd.DataFrame:
    """Train every cell once; one row per cell."""
    from ihprobe import TrainConfig, data, predict_emergence, run_emergence, train

    data.PRODUCERS["periodic"] = Periodic
    rows = []
    for B, C, width in GRID:
        started = time.perf_counter()
        config = TrainConfig(
            out=f"{out}/B{B}-C{C}-d{width}",
            producer="periodic",
            producer_options={},
            layers=2,
            heads=4,
            d_model=width,
            context=C,
            batch_size=B,
            tokens=int(tokens),
            lr=3e-3,
            schedule="constant",
            n_checkpoints=checkpoints,
            progress=False,
        )
        point = run_emergence(train(config), n=16, batch=50)
        rows.append(
            {
                "checkpoints": checkpoints,
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
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def fit_lines(table: pd.DataFrame) -> list[str]:
    """The law refitted on the width-64 runs with a transition, judged against [A]."""
    runs = table[(table.d_model == 64) & (table.updates.astype(str) != "none")]
    runs = runs.assign(
        cell=[f"B{b}-C{c}" for b, c in zip(runs.B, runs.C, strict=True)],
        updates=runs.updates.astype(float),
    )
    fit = cell_means_fit(runs)
    said = [(k, *judge(fit[k], CLAIMS[k])) for k in ("b", "c")]
    return [
        f"Refit over the {len(runs)} width-64 runs with a transition: U = "
        f"{10 ** fit['log10T'].value:,.0f} / (B^{fit['b'].value:.2f} C^{fit['c'].value:.2f}); "
        f"95% intervals b {fit['b'].text('.2f')}, c {fit['c'].text('.2f')}.",
        "Against [A] (b = 0.37, c = 0.62, margin +- 0.15; `benchmarks/verdicts.py`): "
        + "; ".join(f"{k} **{v}**" for k, v, _ in said)
        + ". One seed per cell and four cells leave one residual degree of freedom, so the "
        "intervals are wide; a standard error from the run-level fit ignores that.",
    ]


def recorded_command(md: Path | None = None) -> str | None:
    """The last command a results file records (``--report`` re-renders and runs nothing)."""
    md = md or OUT_MD
    found = re.search(r"^Last command: `([^`]*)`", md.read_text(), re.M) if md.is_file() else None
    return found.group(1) if found else None


def render(table: pd.DataFrame, command: str) -> str:
    """The results file from the CSV of record."""
    lines = [
        "# Emergence law at toy scale (CPU)",
        "",
        f"Last command: `{command}`; rows of every run so far: `RESULTS_law.csv`.",
        "",
        "2-layer GPT-NeoX, 4 heads, vocab 128, rows of 32 random tokens repeating with a "
        "period drawn per row from 8..32; AdamW lr 3e-3 constant, grad clip 1; log-spaced "
        "checkpoints; emergence = start of the steep segment of a 3-segment fit of max PS "
        "against log tokens (probe: n=16, 50 rows). One seed per cell, measured 2026-11-29 "
        "on the shared 2-core CPU. In this data a longer context also means more repeats of "
        "the period per row, so C and repetition are confounded; the absolute numbers are "
        "~40x below [A]'s law (another task, vocabulary and learning rate); the width-128 "
        "run is one seed, not a test of size independence.",
        "",
    ]
    for checkpoints, block in table.groupby("checkpoints", sort=False):
        shown = markdown(block.drop(columns="checkpoints"))
        lines += [f"## {checkpoints} checkpoints per run", "", *shown, "", *fit_lines(block), ""]
    return "\n".join(lines)


def report(command: str) -> None:
    text = render(pd.read_csv(OUT_CSV), command)
    OUT_MD.write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=float, default=1.5e6, help="training tokens per run")
    parser.add_argument("--checkpoints", type=int, default=16, help="log-spaced, per run")
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-law"))
    parser.add_argument("--report", action="store_true", help="only rewrite the markdown")
    args = parser.parse_args(argv)
    command = (recorded_command() if args.report else None) or (
        ".venv/bin/python -m studies toy_law " + " ".join(argv or [])
    )
    if not args.report:
        new = train_grid(args.tokens, args.checkpoints, args.out)
        old = pd.read_csv(OUT_CSV) if OUT_CSV.is_file() else pd.DataFrame()
        keep = old[old.checkpoints != args.checkpoints] if len(old) else old
        pd.concat([new, keep]).to_csv(OUT_CSV, index=False)
    report(command.strip())


if __name__ == "__main__":
    main()
