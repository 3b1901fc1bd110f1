"""The README is a front door: at most 2,000 words, every command of ``ihprobe --help`` in its
table (and in the command-line guide's), no finding quoted, and links that resolve."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ihprobe.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def commands() -> set[str]:
    """The subcommands ``ihprobe --help`` lists."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(action.choices)


def tabled(text: str) -> set[str]:
    """The commands named at the start of a table row: ``| `ihprobe NAME ...` |``."""
    return set(re.findall(r"^\| `ihprobe ([a-z-]+)", text, re.M))


def test_the_readme_is_at_most_2000_words():
    words = len(README.split())
    assert words <= 2000, f"README.md has {words} words; move detail to a page under docs/"


def test_the_readme_and_the_cli_guide_table_every_command():
    assert len(commands()) >= 15
    guide = (ROOT / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
    for text, where in ((README, "README.md"), (guide, "docs/guide/cli.md")):
        assert commands() <= tabled(text), f"{where} lacks {sorted(commands() - tabled(text))}"
        assert tabled(text) <= commands(), f"{where} names {sorted(tabled(text) - commands())}"


def test_the_readme_quotes_no_finding():
    """An interval such as [0.17, 1.63] or a ratio such as 1.73x is a finding: it belongs on the
    findings page, which the README links to."""
    intervals = re.findall(r"\[-?\d+\.\d+, -?\d+\.\d+\]", README)
    ratios = re.findall(r"\b\d+\.\d+x\b", README)
    assert not intervals and not ratios, intervals + ratios
    assert "docs/findings/index.md" in README


def test_the_readmes_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) > 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
