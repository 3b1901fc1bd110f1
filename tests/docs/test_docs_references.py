"""The project documents itself: no module, test, benchmark, notebook, doc page or README line
points at the planning notes it was built from (a "SPEC" or "DESIGN.md"), which are not part of
the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# whole words only: TORCH_SPEC and SPEC_FILE are names, not references
DANGLING = re.compile(r"\bSPEC\b|\bDESIGN\b")


def documented_files() -> list[Path]:
    """The README, docs, notebooks, and the code of the package, benchmarks and tests."""
    docs = [p for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix in {".md", ".txt"}]
    code = [p for d in ("ihprobe", "lab", "tests") for p in (ROOT / d).rglob("*.py")]
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


# a repository path named in prose: a top-level folder of the project, then a path
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:ihprobe|lab|studies|benchmarks|docs|notebooks|hooks|\.ci)/[\w./-]*[\w])(\*|\{)?"
)
# records of how finished runs were made, kept as they were run (lab/studies/README.md says so)
PROVENANCE = {
    ("lab/studies/law/other.py", "benchmarks/papers_law_halves.py"),
    ("lab/studies/law/other.py", "benchmarks/RESULTS_papers_law_halves_demo.csv"),
    ("lab/studies/law/other.py", "benchmarks/RESULTS_papers_law_halves_natural.csv"),
    ("lab/studies/law/other.py", "benchmarks/validate_forecast.py"),
    ("lab/studies/law/other.py", "benchmarks/validate_papers_natural.py"),
    ("lab/README.md", "benchmarks/validate_papers_law.py"),  # says they were renamed
}
# a results file's recorded commands: its provenance lines and its indented command blocks
RECORDED = re.compile(r"^(Runs|Last command|Command): `|^    ")


def named_paths(line: str) -> list[str]:
    """The repository paths a line names, leaving out globs and placeholders (a folder named
    in capitals, ``NAME``; a file in capitals, ``RESULTS.md``, is a path).

    >>> named_paths("see `lab/studies/law/halves.py` and lab/benchmarks/bench_*.py or "
    ...             "lab/studies/NAME/run.py")
    ['lab/studies/law/halves.py']
    >>> named_paths("the grid's lab/studies/natural_law/RESULTS.md")
    ['lab/studies/natural_law/RESULTS.md']
    """
    return [
        path
        for path, glob in REPO_PATH.findall(line)
        if not glob and not re.search(r"/[A-Z_]{3,}(/|$)", path)
    ]


@pytest.mark.parametrize(
    "line, paths",
    [
        (
            "method in `lab/benchmarks/papers_law_forecast.py`;",
            ["lab/benchmarks/papers_law_forecast.py"],
        ),
        ("(`tests/test_x.py`, `docs/x.md`, runs/a/b)", ["docs/x.md"]),
        ("the suite (`lab/benchmarks/bench_*.py`), {lab/studies/NAME/run.py}", []),
        ("the grid's `lab/studies/natural_law/RESULTS.md`", ["lab/studies/natural_law/RESULTS.md"]),
    ],
)
def test_named_paths_finds_paths_and_not_globs(line, paths):
    assert named_paths(line) == paths


def test_every_path_the_project_names_exists():
    """A script that moved leaves no pointer to its old place (outside tests, whose paths are
    made up, and the recorded commands of finished runs)."""
    results = sorted((ROOT / "lab" / "studies").rglob("*.md"))
    missing = [
        f"{rel}:{number}: {path}"
        for file in [*documented_files(), *results]
        if not (rel := file.relative_to(ROOT).as_posix()).startswith(("tests/", "lab/tests/"))
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1)
        if not (file in results and RECORDED.match(line))
        for path in named_paths(line)
        if not (ROOT / path).exists() and (rel, path) not in PROVENANCE
    ]
    assert not missing, "name the file where it is now:\n" + "\n".join(missing)
