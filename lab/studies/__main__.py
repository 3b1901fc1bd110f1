"""``python -m lab.studies NAME [options]``: run or report one study; ``--list`` names them."""

from __future__ import annotations

import sys

from ihprobe import IhprobeError
from lab.studies import run
from lab.studies.cli import quietly
from lab.studies.study import STUDIES, load


def main(argv: list[str] | None = None) -> int:
    """Run one study; a bad name or flag is one line and exit status 2, ``--list | head`` ends
    quietly."""
    argv = sys.argv[1:] if argv is None else argv
    return quietly(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("--list", "-h", "--help"):
        width = max(map(len, STUDIES))
        print("python -m lab.studies NAME [--list | --cell C --seed S | --report]; the studies:")
        for name, (_, question) in STUDIES.items():
            print(f"  {name:<{width}}  {question}")
        return 0
    try:
        study = load(argv[0])
        if study.main is not None:
            return int(study.main(argv[1:]) or 0)
        run.main(study, argv[1:])
    except (IhprobeError, KeyError) as err:
        print(f"python -m lab.studies {argv[0]}: error: {err.args[0]}", file=sys.stderr)
        return 2
    except SystemExit as done:  # a study's parser: one line already printed, or --help
        if isinstance(done.code, str):
            print(f"python -m lab.studies {argv[0]}: error: {done.code}", file=sys.stderr)
            return 2
        return done.code or 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
