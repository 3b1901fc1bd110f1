"""The project documents itself: no module, test, benchmark, notebook, doc page or README line
points at the planning notes it was built from (a "SPEC" or "DESIGN.md"), which are not part of
the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# whole words only: TORCH_SPEC and SPEC_FILE are names, not references
DANGLING = re.compile(r"\bSPEC\b|\bDESIGN\b")


def documented_files() -> list[Path]:
    """The README, docs, notebooks, and the code of the package, benchmarks and tests."""
    docs = [p for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix in {".md", ".txt"}]
    code = [
        p for d in ("ihprobe", "studies", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")
    ]
    notebooks = (ROOT / "notebooks").glob("*.ipynb")
    found = [ROOT / "README.md", *docs, *code, *notebooks]
    return sorted(p for p in found if p != Path(__file__).resolve())


@pytest.mark.parametrize(
    "line, dangling",
    [
        ("the realised values, as SPEC section 5 asks", True),
        ("Defaults: the tiny model of DESIGN.md's sizing.", True),
        ('TORCH_SPEC ?= torch==2.13.0 and SPEC_FILE = "spec.json"', False),
        ("a specification and a design", False),
    ],
)
def test_the_pattern_finds_references_and_not_names(line, dangling):
    assert bool(DANGLING.search(line)) is dangling


def test_no_file_refers_to_the_planning_notes():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in documented_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DANGLING.search(line)
    ]
    assert not found, "say it in the project's own words:\n" + "\n".join(found)
