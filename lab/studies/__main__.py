"""``python -m lab.studies NAME [options]``: run or report one study; ``--list`` names them."""

from __future__ import annotations

import sys

from ihprobe import IhprobeError
from lab.studies import run
from lab.studies.study import STUDIES, load


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("--list", "-h", "--help"):
        width = max(map(len, STUDIES))
        print("python -m lab.studies NAME [--list | --cell C --seed S | --report]; the studies:")
        for name, (_, question) in STUDIES.items():
            print(f"  {name:<{width}}  {question}")
        return 0
    try:
        study = load(argv[0])
        if study.main is not None:
            study.main(argv[1:])
        else:
            run.main(study, argv[1:])
    except (IhprobeError, KeyError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
