"""The docs site builds with ``mkdocs build --strict`` (as ``make docs``), and its index, a guide
page and an API page load in headless Chromium with no script error and every internal link
resolving: to a file of the built site, and a ``#fragment`` to an id on the page it names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["index.html", "guide/scanning.html", "api/probes.html"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def browser() -> None:
    """Chromium is there, or the test skips, except under CI (``CI`` set), where it fails."""
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        if os.environ.get("CI"):
            pytest.fail(
                "Chromium is missing under CI: .ci/run installs it (apt-get install chromium)"
            )
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")


def internal_links(dom: str) -> list[str]:
    """The href of every link and stylesheet of ``dom`` that stays inside the site.

    >>> internal_links('<a href="x.html#a">x</a><a href="https://e.org">e</a><a href="#b">b</a>')
    ['x.html#a', '#b']
    """
    hrefs = [unescape(h) for h in re.findall(r'\shref="([^"]*)"', dom)]
    return [h for h in hrefs if h and not urlsplit(h).scheme and not h.startswith("//")]


def target(page: Path, href: str) -> tuple[Path, str]:
    parts = urlsplit(href)
    file = (page.parent / unquote(parts.path)).resolve() if parts.path else page
    if file.is_dir():
        file = file / "index.html"
    return file, unquote(parts.fragment)


@pytest.mark.slow  # builds the site: about 20 s of CPU
def test_the_site_builds_strict_with_every_page(site):
    for page in [*PAGES, "reliability.html", "guide/from-transformerlens.html", "api/data.html"]:
        assert (site / page).is_file(), page
    html = (site / "api" / "probes.html").read_text(encoding="utf-8")
    assert 'id="ihprobe.probes.battery.scan"' in html  # the scan's own section
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert 'Int[Tensor, "batch pos"]' in text  # its signature, with the shapes of its arrays
    assert ">>> scores = scan(model" in text, "scan's example is not on the page"


@pytest.mark.slow  # builds the site, then starts Chromium once per page
@pytest.mark.parametrize("name", PAGES)
def test_the_page_loads_and_its_internal_links_resolve(site, name):
    browser()
    from tests.browser import render

    page = site / name
    rendered = render(page)
    assert rendered.errors == [], rendered.errors
    assert "<h1" in rendered.dom
    links = internal_links(rendered.dom)
    assert len(links) > 10, links  # the nav at least
    broken = []
    for href in links:
        file, fragment = target(page, href)
        if not file.is_file():
            broken.append(href)
        elif fragment and f'id="{fragment}"' not in file.read_text(encoding="utf-8"):
            broken.append(href)
    assert not broken, broken


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="Chromium is missing under CI"):
        browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        browser()


def test_the_nav_sections_follow_their_folders(tmp_path):
    from mkdocs_hooks import _follow

    (tmp_path / "methods").mkdir()
    for name in ("a.md", "c.md", "b.md"):
        (tmp_path / "methods" / name).write_text("# x\n")
    listed = [{"A": "methods/a.md"}, "methods/gone.md", {"Elsewhere": "science.md"}]
    assert _follow(listed, "methods", tmp_path) == [
        {"A": "methods/a.md"},  # kept, in its place
        {"Elsewhere": "science.md"},  # outside the folder: kept (the build checks it)
        "methods/b.md",  # unlisted pages appended, by name
        "methods/c.md",
    ]


def test_every_results_file_of_the_lab_is_on_a_findings_page():
    """A finding lives in one results file, and the site shows every one of them."""
    root = Path(__file__).resolve().parents[2]
    included = set()
    for page in (root / "docs" / "findings").glob("*.md"):
        included |= set(re.findall(r'^--8<-- "([^"]+)"$', page.read_text(), flags=re.M))
    files = {str(p.relative_to(root)) for p in (root / "lab").rglob("RESULTS*.md")}
    assert files - included == set(), "add these to a page of docs/findings/"
    assert included - files == set(), "these included files do not exist"
