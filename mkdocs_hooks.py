"""mkdocs hook (mkdocs.yml, ``hooks``): the nav's folder sections follow their folders.

The guide, the methods and the findings are written by several hands while the site grows:
under a nav section named in FOLDERS, an entry whose file is missing is dropped, and a page of
that folder that the nav does not list is appended to the section (sorted by name), so that a
page added or renamed there never breaks the strict build nor goes unlisted. Any other nav entry
without its file still fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe

EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)

# nav section -> its folder under docs/
FOLDERS = {"Guide": "guide", "Methods": "methods", "Findings": "findings"}


def _files(items: list) -> list[str]:
    out = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _files(value) if isinstance(value, list) else [value]
    return out


def _follow(items: list, folder: str, docs: Path) -> list:
    """``items`` without entries under ``folder`` whose file is missing, then the folder's pages
    the nav does not list."""

    def present(item) -> bool:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        return not (value.startswith(folder + "/") and not (docs / value).is_file())

    kept = [item for item in items if present(item)]
    listed = set(_files(kept))
    extra = sorted(
        p.relative_to(docs).as_posix()
        for p in (docs / folder).glob("*.md")
        if p.relative_to(docs).as_posix() not in listed
    )
    return kept + extra


def on_config(config):
    """Make each FOLDERS section of ``config.nav`` follow its folder."""
    docs = Path(config.docs_dir)
    nav = []
    for item in config.nav or []:
        if isinstance(item, dict):
            (title, value), *_ = item.items()
            if title in FOLDERS:
                value = _follow(value if isinstance(value, list) else [value], FOLDERS[title], docs)
                item = {title: value}
        nav.append(item)
    config.nav = nav
    return config


class ExampleSections(griffe.Extension):
    """A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): ihprobe's docstrings title
    their doctests ``Example:``, which the Google parser reads as an admonition of prose; as
    ``Examples:`` they render as Python code."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
