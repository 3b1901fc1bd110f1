"""The API reference (docs/api/) documents every public name, and every public docstring has an
example (which the suite runs as a doctest)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import ihprobe
import ihprobe.data

API = Path(__file__).resolve().parents[2] / "docs" / "api"

PUBLIC = [("ihprobe", n) for n in ihprobe.__all__] + [
    ("ihprobe.data", n) for n in ihprobe.data.__all__
]


def documented() -> dict[str, object]:
    """Every ``::: module.name`` entry of the API pages -> the object it names."""
    found = {}
    for page in sorted(API.glob("*.md")):
        for path in re.findall(r"^::: ([\w.]+)$", page.read_text(encoding="utf-8"), re.M):
            module, name = path.rsplit(".", 1)
            found[path] = getattr(importlib.import_module(module), name)
    return found


def test_every_public_name_is_on_an_api_page():
    objects = documented()
    missing = [
        f"{package}.{name}"
        for package, name in PUBLIC
        if not any(getattr(importlib.import_module(package), name) is o for o in objects.values())
    ]
    assert not missing, f"not on any docs/api/*.md page (add a '::: module.name' line): {missing}"


def test_the_api_pages_name_only_public_objects():
    public = [getattr(importlib.import_module(p), n) for p, n in PUBLIC]
    stray = [path for path, o in documented().items() if not any(o is p for p in public)]
    assert not stray, f"docs/api/ documents names outside both __all__s: {stray}"


@pytest.mark.parametrize(("package", "name"), PUBLIC, ids=[f"{p}.{n}" for p, n in PUBLIC])
def test_every_public_docstring_has_an_example(package, name):
    obj = getattr(importlib.import_module(package), name)
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        # a table (METRIC_TABLE, PRODUCERS, TEXT_SUFFIXES): its example is in its module's docstring
        obj = importlib.import_module(
            {
                "METRIC_TABLE": "ihprobe.probes.metrics",
                "PRODUCERS": "ihprobe.data.registry",
                "TEXT_SUFFIXES": "ihprobe.data.text",
            }[name]
        )
        assert name in (obj.__doc__ or ""), f"{obj.__name__}'s docstring does not mention {name}"
    doc = inspect.getdoc(obj) or ""
    assert ">>> " in doc, f"{package}.{name}'s docstring has no example (a short doctest)"
