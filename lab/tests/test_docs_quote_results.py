"""Pages that quote a finding quote only what the committed results files say: every interval
a page prints, ``estimate [low, high]``, is one of the results files' intervals rounded to the
page's digits. The findings live in the rendered results files (the findings pages include them
when the site is built; ``test_findings_once`` keeps each in one file); the README, the guide
and the methods pages link to them. A rerun that moves a number fails here until the page
follows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _rounds_to(quoted: str, value: float) -> bool:
    """Whether ``value`` printed with ``quoted``'s decimals is ``quoted``."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    return abs(value - _value(quoted)) <= 0.5 * 10**-decimals + 1e-12


def unsupported(section: str, results: str) -> list[str]:
    """The intervals quoted in ``section`` that no interval of ``results`` rounds to.

    >>> unsupported("b = 0.98 [0.73, 1.24]", "b 0.983 [0.728, 1.24] (t, df 6)")
    []
    >>> unsupported("b = 0.98 [0.70, 1.24]", "b 0.983 [0.728, 1.24] (t, df 6)")
    ['0.98 [0.70, 1.24]']
    """
    found = [tuple(map(_value, m.groups())) for m in INTERVAL.finditer(results)]
    return [
        quoted.group(0)
        for quoted in INTERVAL.finditer(section)
        if not any(all(map(_rounds_to, quoted.groups(), triple)) for triple in found)
    ]


@pytest.mark.parametrize(
    "readme, verdict",
    [
        ("1,950 [1,428, 2,664] updates", []),  # thousands separators
        ("1,950 [1,428, 2,665] updates", ["1,950 [1,428, 2,665]"]),  # one digit off
        ("0.72 [0.66, 0.78] and 0.5 [0.4, 0.6]", ["0.5 [0.4, 0.6]"]),  # an interval it never ran
    ],
)
def test_the_check_finds_quoted_intervals_the_results_do_not_hold(readme, verdict):
    results = "geometric mean 1,950 [1,428, 2,664]; difference 0.718 [0.659, 0.777] (Welch t)"
    assert unsupported(readme, results) == verdict


# the results files: the studies' and the speed benchmarks'
RESULTS_FILES = sorted(
    [
        *(ROOT / "lab" / "studies").rglob("RESULTS*.md"),
        *(ROOT / "lab" / "benchmarks").glob("RESULTS_*.md"),
    ]
)
# the pages that may quote a finding: the README, the docs site's pages, the lab's README
PAGES = sorted([ROOT / "README.md", ROOT / "lab" / "README.md", *(ROOT / "docs").rglob("*.md")])


def test_every_interval_a_page_quotes_is_in_a_results_file():
    results = "\n".join(p.read_text(encoding="utf-8") for p in RESULTS_FILES)
    assert len(INTERVAL.findall(results)) > 100  # the results files still hold their intervals
    unheld = {
        str(page.relative_to(ROOT)): found
        for page in PAGES
        if (found := unsupported(page.read_text(encoding="utf-8"), results))
    }
    assert unheld == {}
