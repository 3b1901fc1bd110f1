"""The layering of docs/architecture.md, checked: the folder a module sits in is its layer, a
folder imports only its own modules and folders below it, the doc's table and the tree name the
same folders, and no two modules import each other, directly or in a ring. Module sizes and
``fmt: skip`` markers are checked in ``test_architecture_size.py``."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ihprobe"
DOC = PACKAGE.parent / "docs" / "architecture.md"
TOP_LEVEL = {"__init__", "__main__"}  # the only modules outside a layer folder


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


# Beside the package: lab/studies/ (the paper reproductions) and lab/benchmarks/ (speed only).
REPO = PACKAGE.parent
# The public surfaces, the one table of them (docs/architecture.md, "Public names"): a script
# outside the package may import any name a surface lists in its ``__all__``.
PUBLIC_SURFACES = {
    "ihprobe": "the top-level names: its _EXPORTS table, imported lazily",
    "ihprobe.data": "the data surface: the producers, their types and the text corpus",
}
# what lab/studies/ may import beyond them: the grid runner, the claim grammar and the law's fits
STUDIES_MAY_IMPORT = {
    "ihprobe.jobs.grid",
    "ihprobe.dynamics.verdicts",
    "ihprobe.dynamics.law",
    "ihprobe.dynamics.lack_of_fit",
}
# The internal names a script outside the package still uses, each with why: the speed
# benchmarks time parts of the package, or build exactly the inputs those parts take. A new
# internal import fails the test below; a name nothing uses any more must leave the list.
INTERNAL_NAMES = {
    "ihprobe.causal.evaluation.evaluate_groups": "bench_ablation: the stacked groups, timed",
    "ihprobe.causal.evaluation.repeated_probe": "bench_ablation: the probe those groups run",
    "ihprobe.causal.masks.mean_z": "bench_ablation: the mean-ablation values those groups take",
    "ihprobe.io.attention.pair_pass": "bench_fastpath: the SDPA pass the floor is timed in",
    "ihprobe.io.swap.load_weights": "bench_scale: the weight swap, timed",
    "ihprobe.probes.engine.MAX_LOGITS": "bench_scale: ablate at the budget it had before",
    "ihprobe.probes.inputs.snippets": "bench_scale: the snippet rows scan runs, forwarded bare",
    "ihprobe.series.checkpoint_rows": "bench_series: the read and compute steps, each timed",
    "ihprobe.core.devices.stray_tensors": "device_checks: tensors left off the device",
    "ihprobe.jobs.sweep": "device_seeds: K runs per device, launched as ihprobe sweep does",
}
# a ratchet on how many there are: lower it as names go; never raise it
MAX_INTERNAL_NAMES = 10


def imported_modules(source: str) -> set[str]:
    r"""Every module a source imports by name (``from a.b import c`` -> ``a.b``), anywhere.

    >>> source = "import os\nfrom lab.studies.law import run\ndef f():\n    import x.y"
    >>> sorted(imported_modules(source))
    ['lab.studies.law', 'os', 'x.y']
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


def surface_names() -> dict[str, set[str]]:
    """Each public surface's names (its ``__all__``)."""
    return {m: set(importlib.import_module(m).__all__) for m in PUBLIC_SURFACES}


def internal_names(source: str, public: dict[str, set[str]]) -> set[str]:
    r"""The package names a source outside it imports that no public surface lists, spelled
    ``module.name`` (``from ihprobe.io.runs import RunDir`` -> ``ihprobe.io.runs.RunDir``), or
    the module itself for ``import ihprobe.x.y``; the study tools (:data:`STUDIES_MAY_IMPORT`)
    are not counted.

    >>> public = {"ihprobe": {"load"}, "ihprobe.data": {"make_producer"}}
    >>> sorted(internal_names("from ihprobe import load, core\nimport ihprobe.io.runs\n"
    ...     "from ihprobe.data import make_producer, text", public))
    ['ihprobe.core', 'ihprobe.data.text', 'ihprobe.io.runs']
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and under(node.module, "ihprobe"):
            if node.module in STUDIES_MAY_IMPORT:
                continue
            listed = public.get(node.module, set())
            found |= {f"{node.module}.{a.name}" for a in node.names if a.name not in listed}
        elif isinstance(node, ast.Import):
            found |= {
                a.name
                for a in node.names
                if under(a.name, "ihprobe") and a.name not in set(public) | STUDIES_MAY_IMPORT
            }
    return found


def notebook_code(text: str) -> str:
    """A notebook's code cells as one source, IPython's ``%`` and ``!`` lines left out."""
    cells = [c for c in json.loads(text)["cells"] if c["cell_type"] == "code"]
    lines = [line for c in cells for line in "".join(c["source"]).splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def scripts_outside() -> dict[str, str]:
    """Every source outside the package that imports it: studies, benchmarks, notebooks."""
    sources = sources_under("lab/studies", "lab/benchmarks", "notebooks", "hooks")
    for p in sorted((REPO / "notebooks").glob("*.ipynb")):
        sources[str(p.relative_to(REPO))] = notebook_code(p.read_text())
    return sources


def internal_uses(sources: dict[str, str]) -> dict[str, list[str]]:
    """Internal name -> the paths that import it."""
    public, uses = surface_names(), {}
    for path, source in sources.items():
        for name in internal_names(source, public):
            uses.setdefault(name, []).append(path)
    return uses


def test_scripts_outside_the_package_use_public_names_and_the_listed_internals():
    sources = scripts_outside()
    assert len(sources) > 30 and any(p.endswith(".ipynb") for p in sources)
    uses = internal_uses(sources)
    unlisted = {name: paths for name, paths in uses.items() if name not in INTERNAL_NAMES}
    assert unlisted == {}, f"internal names outside the package (use public ones): {unlisted}"
    stale = set(INTERNAL_NAMES) - set(uses)
    assert not stale, f"nothing imports these any more; remove them from the list: {stale}"
    assert len(uses) <= len(INTERNAL_NAMES) <= MAX_INTERNAL_NAMES


def test_studies_import_public_names_the_grid_runner_and_the_claim_grammar():
    studies = {p: s for p, s in scripts_outside().items() if p.startswith("lab/studies/")}
    assert internal_uses(studies) == {}
    used = {m for s in studies.values() for m in imported_modules(s) if under(m, "ihprobe")}
    assert used <= set(PUBLIC_SURFACES) | STUDIES_MAY_IMPORT, used - set(PUBLIC_SURFACES)


def test_a_planted_internal_import_is_caught():
    sources = scripts_outside()
    sources["lab/studies/law/claims.py"] += "\nfrom ihprobe.io.runs import RunDir, run_meta\n"
    sources["lab/benchmarks/bench_data.py"] += "\ndef f():\n    import ihprobe.core.cache\n"
    cell = {
        "cell_type": "code",
        "source": ["%matplotlib inline\n", "from ihprobe.data import text"],
    }
    sources["notebooks/x.ipynb"] = notebook_code(json.dumps({"cells": [cell]}))
    uses = internal_uses(sources)
    assert uses["ihprobe.io.runs.RunDir"] == ["lab/studies/law/claims.py"]
    assert uses["ihprobe.io.runs.run_meta"] == ["lab/studies/law/claims.py"]  # public as ihprobe's
    assert uses["ihprobe.core.cache"] == ["lab/benchmarks/bench_data.py"]
    assert uses["ihprobe.data.text"] == ["notebooks/x.ipynb"]
    assert len(set(uses) - set(INTERNAL_NAMES)) == 4


def test_the_public_surfaces_are_documented():
    text = DOC.read_text()
    assert all(f"`{m}`" in text for m in PUBLIC_SURFACES)
    assert "make_producer" in surface_names()["ihprobe.data"]


def test_nothing_outside_the_lab_imports_it():
    """The library, its tests and the notebooks never import the lab (``lab/``)."""
    assert forbidden_imports(sources_under("ihprobe", "tests", "notebooks"), ("lab",)) == []


def test_benchmarks_import_neither_tests_nor_studies():
    assert forbidden_imports(sources_under("lab/benchmarks"), ("tests", "lab")) == []


def test_a_planted_import_of_studies_is_caught():
    planted = {"ihprobe/x.py": "def f():\n    from lab.studies.law import run\n"}
    assert forbidden_imports(planted, ("lab",)) == ["ihprobe/x.py imports lab.studies.law"]


SYS_PATH_EDIT = re.compile(r"sys\.path\.(insert|append|extend)|sys\.path\s*(\+?=|\[)")


def test_no_module_edits_sys_path():
    """Scripts and tests import the package and lab/studies/ by name from the repository root."""
    sources = sources_under("ihprobe", "lab", "tests", "notebooks", "hooks")
    edits = [path for path, source in sources.items() if SYS_PATH_EDIT.search(source)]
    assert edits == []
    planted = "sys." + 'path.insert(0, "benchmarks")'  # spelled apart: this file edits nothing
    assert SYS_PATH_EDIT.search(planted)
