"""The emergence law at toy scale on CPU (README "Validation"; not a test): the command line.

Trains the cells of :mod:`studies.toy_law.cells` (:mod:`~studies.toy_law.measure`), appends
their rows to ``RESULTS_law.csv`` beside it (one block per ``--checkpoints`` setting) and writes
``RESULTS_law.md`` from it (:mod:`~studies.toy_law.claims`). Run from the repository root:
``.venv/bin/python -m lab.studies toy_law [--tokens 1.5e6] [--checkpoints 16]``;
``--report`` only rewrites the markdown from the CSV.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from lab.studies.cli import OneLineParser
from lab.studies.study import ROOT
from lab.studies.toy_law import cells, claims

OUT_MD, OUT_CSV = (
    Path(__file__).with_name("RESULTS_law.md"),
    Path(__file__).with_name("RESULTS_law.csv"),
)


def recorded_command(md: Path | None = None) -> str | None:
    """The last command a results file records (``--report`` re-renders and runs nothing)."""
    md = md or OUT_MD
    found = re.search(r"^Last command: `([^`]*)`", md.read_text(), re.M) if md.is_file() else None
    return found.group(1) if found else None


def report(command: str) -> None:
    text = claims.render(pd.read_csv(OUT_CSV), command)
    OUT_MD.write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m lab.studies toy_law")
    parser.add_argument(
        "--tokens", type=float, default=cells.TOKENS, help="training tokens per run"
    )
    parser.add_argument(
        "--checkpoints", type=int, default=cells.CHECKPOINTS, help="log-spaced, per run"
    )
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-law"))
    parser.add_argument("--report", action="store_true", help="only rewrite the markdown")
    args = parser.parse_args(argv)
    command = (recorded_command() if args.report else None) or (
        ".venv/bin/python -m lab.studies toy_law " + " ".join(argv or [])
    )
    if not args.report:
        from lab.studies.toy_law.measure import train_grid  # trains: torch only when it does

        new = train_grid(args.tokens, args.checkpoints, args.out)
        old = pd.read_csv(OUT_CSV) if OUT_CSV.is_file() else pd.DataFrame()
        keep = old[old.checkpoints != args.checkpoints] if len(old) else old
        pd.concat([new, keep]).to_csv(OUT_CSV, index=False)
    report(command.strip())


if __name__ == "__main__":
    main()
