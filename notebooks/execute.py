"""Execute the notebooks in place, so that they are committed with their outputs and figures.

    .venv/bin/python notebooks/execute.py            # all of them, from notebooks/
    .venv/bin/python notebooks/execute.py 02_watch_heads_emerge.ipynb

They share the demo's run (``runs/demo``, trained on first use). The test suite imports
``execute`` to run them in a temporary directory.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
CELL_TIMEOUT_S = 300  # a cell that trains the demo's run on a loaded 2-core machine


def execute(path: Path, cwd: Path) -> tuple[nbformat.NotebookNode, float]:
    """Run ``path`` top to bottom in a fresh kernel started in ``cwd``; the executed notebook
    and the seconds it took."""
    book = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        book,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    for cell in book.cells:  # when each cell ran: noise in every diff of a re-executed notebook
        cell.metadata.pop("execution", None)
    return book, time.perf_counter() - start


def main(names: list[str]) -> None:
    for path in [HERE / n for n in names] or sorted(HERE.glob("*.ipynb")):
        book, seconds = execute(path, HERE)
        nbformat.write(book, path)
        print(f"{path.name}: {seconds:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
