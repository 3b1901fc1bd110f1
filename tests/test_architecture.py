"""The layering of docs/architecture.md, checked: the folder a module sits in is its layer, a
folder imports only its own modules and folders below it, the doc's table and the tree name the
same folders, and no two modules import each other, directly or in a ring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ihprobe"
DOC = PACKAGE.parent / "docs" / "architecture.md"
TOP_LEVEL = {"__init__", "__main__"}  # the only modules outside a layer folder
MAX_LINES = 400


def doc_layers(text: str) -> list[str]:
    """The folders of the doc's layer table, lowest first: rows like ``| 1 | `core/` | ... |``.

    >>> doc_layers("| 1 | `core/` | x |\\n| 2 | `data/` | y |")
    ['core', 'data']
    """
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*`(\w+)/`\s*\|", text, re.M)
    return [name for _, name in sorted(rows, key=lambda r: int(r[0]))]


LAYERS = doc_layers(DOC.read_text())


def module_name(path: Path) -> str:
    """``ihprobe/data/__init__.py`` -> ``ihprobe.data``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {module_name(p): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def imports(source: str, known: set[str]) -> set[str]:
    """The ihprobe modules a source imports, at the top or inside functions.

    ``from ihprobe.core import cache`` imports the module ``ihprobe.core.cache``; imports under
    ``if TYPE_CHECKING:`` only name types and do not count.
    """
    tree = ast.parse(source)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ihprobe"):
            if node.module == "ihprobe" and {a.name for a in node.names} == {"__version__"}:
                continue  # the version string: the root package imports nothing eagerly
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ihprobe")}
    return found


def layer_of(module: str) -> int | None:
    """The layer index of ``ihprobe.folder.x``; None for the top-level modules."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in TOP_LEVEL):
        return None
    if parts[1] not in LAYERS:
        raise AssertionError(f"{module} is in no layer folder of docs/architecture.md")
    return LAYERS.index(parts[1])


def upward_imports(sources: dict[str, str]) -> list[str]:
    """Every import of a module from a folder above the importer's, as readable lines."""
    found = []
    for module, source in sorted(sources.items()):
        here = layer_of(module)
        for target in sorted(imports(source, set(sources))):
            there = layer_of(target) if target != "ihprobe" else -1
            if here is not None and (there is None or there > here):
                found.append(f"{module} ({LAYERS[here]}/) imports {target}")
    return found


def test_imports_go_down_the_layers():
    assert upward_imports(SOURCES) == []


def test_a_planted_upward_import_is_caught():
    planted = dict(SOURCES)
    planted["ihprobe.core.errors"] += "\nfrom ihprobe.cli import main\n"
    assert upward_imports(planted) == ["ihprobe.core.errors (core/) imports ihprobe.cli"]
    planted = dict(SOURCES)
    planted["ihprobe.probes.engine"] += "\ndef f():\n    import ihprobe.circuit.patching\n"
    assert "ihprobe.probes.engine (probes/) imports ihprobe.circuit.patching" in upward_imports(
        planted
    )


def test_the_doc_and_the_tree_name_the_same_folders():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(LAYERS) == folders, (
        f"in the tree, not the doc: {sorted(folders - set(LAYERS))}; "
        f"in the doc, not the tree: {sorted(set(LAYERS) - folders)}"
    )
    assert len(LAYERS) == len(set(LAYERS))


def test_only_the_entry_points_sit_at_the_top():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL


def test_no_import_cycles():
    def related(a: str, b: str) -> bool:  # a package re-exporting its own modules is no cycle
        return a == b or a.startswith(b + ".") or b.startswith(a + ".")

    graph = {
        m: {t for t in imports(s, set(SOURCES)) if t in SOURCES and not related(m, t)}
        for m, s in SOURCES.items()
    }
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                ring = path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(ring))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


SCRIPTS_AND_TESTS = sorted(
    str(p.relative_to(PACKAGE.parent))
    for folder in ("benchmarks", "studies", "tests", "notebooks", "hooks")
    for p in (PACKAGE.parent / folder).rglob("*.py")
)


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_modules_stay_short(module):
    lines = SOURCES[module].count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines (at most {MAX_LINES}): split it"


def test_scripts_and_tests_stay_short_too():
    lines = {name: (PACKAGE.parent / name).read_text().count("\n") for name in SCRIPTS_AND_TESTS}
    long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert len(SCRIPTS_AND_TESTS) > 50 and not long, f"split these (at most {MAX_LINES}): {long}"


# ``# fmt: skip`` keeps a module short by packing lines, not by splitting ideas: a ratchet on
# the markers left in the package (lower it as they go; never raise it).
FMT_SKIPS = 0
FMT_MARKER = re.compile(r"#\s*fmt:\s*(skip|off)")


def test_fmt_skip_markers_only_go_down():
    found = {m: n for m, s in SOURCES.items() if (n := len(FMT_MARKER.findall(s)))}
    total = sum(found.values())
    assert total <= FMT_SKIPS, f"{total} fmt: skip/off markers (at most {FMT_SKIPS}): {found}"
    assert FMT_MARKER.search("x = 1  # fmt: skip") and FMT_MARKER.search("# fmt: off")


def long_functions(source: str) -> list[str]:
    r"""Functions over 60 lines whose docstring does not say why (the words "60 lines").

    >>> long_functions("def f():\n" + "    x = 1\n" * 61)
    ['f']
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = " ".join((ast.get_docstring(node) or "").split())
            if node.end_lineno - node.lineno + 1 > 60 and "60 lines" not in doc:
                found.append(node.name)
    return found


def test_long_functions_say_why():
    unexplained = {m: f for m, s in SOURCES.items() if (f := long_functions(s))}
    assert unexplained == {}, f"functions over 60 lines without a reason: {unexplained}"


# Beside the package: studies/ (the paper reproductions) and benchmarks/ (speed only).
REPO = PACKAGE.parent
# what studies/ may import of the package: the public names (``import ihprobe``), the grid
# runner, the claim grammar and the law's fits over seeds ...
STUDIES_MAY_IMPORT = {
    "ihprobe",
    "ihprobe.jobs.grid",
    "ihprobe.dynamics.verdicts",
    "ihprobe.dynamics.law",
    "ihprobe.dynamics.lack_of_fit",
}
# ... and, until each is replaced by a public name, these internal modules: a ratchet (a
# study that needs another internal module fails here; remove a line once nothing uses it)
STUDIES_STILL_IMPORT = {
    "ihprobe.core",
    "ihprobe.core.files",
    "ihprobe.data",  # the data surface: producer types, the text corpus (its __all__)
    "ihprobe.io.architectures",
    "ihprobe.io.models",
    "ihprobe.io.runs",
    "ihprobe.probes.engine",
    "ihprobe.probes.metrics",
    "ihprobe.probes.recall",
}


def imported_modules(source: str) -> set[str]:
    r"""Every module a source imports by name (``from a.b import c`` -> ``a.b``), anywhere.

    >>> sorted(imported_modules("import os\nfrom studies.law import run\ndef f():\n    import x.y"))
    ['os', 'studies.law', 'x.y']
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def sources_under(*folders: str) -> dict[str, str]:
    return {
        str(p.relative_to(REPO)): p.read_text()
        for folder in folders
        for p in sorted((REPO / folder).rglob("*.py"))
    }


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def forbidden_imports(sources: dict[str, str], packages: tuple[str, ...]) -> list[str]:
    """``path imports module`` for each import of one of ``packages`` in ``sources``."""
    return [
        f"{path} imports {module}"
        for path, source in sources.items()
        for module in sorted(imported_modules(source))
        if any(under(module, p) for p in packages)
    ]


def test_studies_import_public_names_the_grid_runner_and_the_claim_grammar():
    allowed = STUDIES_MAY_IMPORT | STUDIES_STILL_IMPORT
    used = {
        (path, module)
        for path, source in sources_under("studies").items()
        for module in imported_modules(source)
        if under(module, "ihprobe")
    }
    assert sorted(f"{path} imports {m}" for path, m in used if m not in allowed) == []
    stale = STUDIES_STILL_IMPORT - {m for _, m in used}
    assert not stale, f"no study imports these any more; remove them from the list: {stale}"


def test_nothing_but_the_studies_and_their_tests_imports_studies():
    assert (
        forbidden_imports(sources_under("ihprobe", "benchmarks", "notebooks"), ("studies",)) == []
    )


def test_benchmarks_import_neither_tests_nor_studies():
    assert forbidden_imports(sources_under("benchmarks"), ("tests", "studies")) == []


def test_a_planted_import_of_studies_is_caught():
    planted = {"ihprobe/x.py": "def f():\n    from studies.law import run\n"}
    assert forbidden_imports(planted, ("studies",)) == ["ihprobe/x.py imports studies.law"]


SYS_PATH_EDIT = re.compile(r"sys\.path\.(insert|append|extend)|sys\.path\s*(\+?=|\[)")


def test_no_module_edits_sys_path():
    """Scripts and tests import the package and studies/ by name from the repository root."""
    sources = sources_under("ihprobe", "studies", "benchmarks", "tests", "notebooks", "hooks")
    edits = [path for path, source in sources.items() if SYS_PATH_EDIT.search(source)]
    assert edits == []
    planted = "sys." + 'path.insert(0, "benchmarks")'  # spelled apart: this file edits nothing
    assert SYS_PATH_EDIT.search(planted)
