"""mkdocs hook (mkdocs.yml, ``hooks``): drop the nav entries of pages that are still being
written (OPTIONAL) while their file is missing, so that the strict build passes before they
land; any other nav entry without its file still fails the build."""

from __future__ import annotations

import re
from pathlib import Path

import griffe

EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)

OPTIONAL = {
    "guide/larger-than-memory.md",
    "methods/fv.md",
    "methods/metrics.md",
    "findings/index.md",
}


def _prune(items: list, docs: Path) -> list:
    kept = []
    for item in items:
        if isinstance(item, dict):
            (title, value), *_ = item.items()
            if isinstance(value, list):
                value = _prune(value, docs)
                if value:
                    kept.append({title: value})
                continue
            if value in OPTIONAL and not (docs / value).is_file():
                continue
        kept.append(item)
    return kept


def on_config(config):
    """Remove OPTIONAL pages whose file does not exist yet from ``config.nav``."""
    config.nav = _prune(config.nav or [], Path(config.docs_dir))
    return config


class ExampleSections(griffe.Extension):
    """A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): ihprobe's docstrings title
    their doctests ``Example:``, which the Google parser reads as an admonition of prose; as
    ``Examples:`` they render as Python code."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
