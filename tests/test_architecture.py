"""The layering of docs/architecture.md, checked: every module has a layer, imports only go down
(or sideways within a layer), and no two modules import each other, directly or in a ring."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ihprobe"

# Lowest first. A module may import modules of its own layer or of a lower one. The same table
# stands in docs/architecture.md; a new module gets a row in both.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundations", ("errors", "files", "standin", "hooks", "inputs", "architectures",
                     "schedule", "law", "data")),
    ("result types", ("scores",)),
    ("run folder and loading", ("runs", "sources", "hub_cache", "weights", "validation", "models",
                                "world", "train_config")),
    ("results", ("probes", "masks", "head_sets", "tasks", "ablation", "ablation_series",
                 "ablation_result", "changepoint", "trajectories", "shard", "circuit",
                 "forecast", "llc")),
    ("training", ("trainer", "live")),
    ("views", ("figures", "report", "demo_report")),
    ("jobs and CLI", ("demo", "sweep", "cluster", "cli", "__main__")),
)  # fmt: skip


def module_name(path: Path) -> str:
    """``ihprobe/data/__init__.py`` -> ``ihprobe.data``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """The ihprobe modules a file imports, at the top or inside functions.

    ``from ihprobe.data import cache`` imports the module ``ihprobe.data.cache``.
    """
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:  # names for annotations: nothing is imported at run time
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ihprobe"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ihprobe")}
    return found


def layer_of(module: str) -> int | None:
    """The layer index of ``ihprobe.x.y`` by its first component; None for the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for index, (_, names) in enumerate(LAYERS):
        if parts[1] in names:
            return index
    raise AssertionError(f"{module} has no layer: add it to LAYERS and docs/architecture.md")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    here = layer_of(module)
    for target in imports(MODULES[module]):
        there = layer_of(target)
        if here is None or there is None:
            continue
        assert there <= here, (
            f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]}), a higher layer"
        )


def test_no_import_cycles():
    def related(a: str, b: str) -> bool:  # a package re-exporting its own modules is no cycle
        return a == b or a.startswith(b + ".") or b.startswith(a + ".")

    graph = {
        m: {t for t in imports(p) if t in MODULES and not related(m, t)} for m, p in MODULES.items()
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


def test_the_architecture_doc_lists_every_layer_module():
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    missing = [name for _, names in LAYERS for name in names if f"`{name}" not in doc]
    assert not missing, f"docs/architecture.md does not mention: {missing}"
