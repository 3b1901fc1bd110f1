"""The methods pages state what the code computes: the head check's chance levels are the metric
table's, at each repeat length the check reads (issue 60: uniform attention scores 0.067 at
n = 10, not below 0.05), and the science page links every methods page that exists."""

from __future__ import annotations

import re
from pathlib import Path

from ihprobe.causal.head_check import Rule
from ihprobe.probes.metrics import METRIC_TABLE

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_head_check_page_gives_the_computed_chance_at_each_length():
    text = " ".join((DOCS / "methods" / "head-check.md").read_text(encoding="utf-8").split())
    lengths = Rule().lengths
    chance = [f"{METRIC_TABLE['prefix_matching'].chance(512, n):.3f}" for n in lengths]
    quoted = f"attention spread evenly scores {', '.join(chance[:-1])} and {chance[-1]} there"
    assert quoted in text, quoted
    assert float(chance[0]) > 0.05  # the claim "below 0.05" was false at n = 10
    assert "below 0.05" not in text


def test_the_science_page_links_every_methods_page():
    science = (DOCS / "science.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(methods/([\w-]+\.md)\)", science))
    pages = {p.name for p in (DOCS / "methods").glob("*.md")} - {"fv.md"}  # fv.md: its own
    assert pages <= linked, pages - linked
