"""Every finding lives in exactly one tracked file: its rendered results file (beside its CSV of
record). No other page (the README, docs/, the lab's READMEs, notebooks' markdown) copies one,
and no two results files share one, so a rerun changes a finding in one place. A finding here
is an interval, ``[0.17, 1.63]``, or an exponent or correlation quoted alone, ``c = 1.76``;
ranges of whole numbers (``[0, 1]``) and Clopper-Pearson intervals of a count (``k`` of ``n``
seeds: a property of the count, shared by every study with that count) are not findings.
Reading every page costs about 5 s of one core."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"\[({NUMBER}), ({NUMBER})\]")
POINT = re.compile(r"(?<![\w.])([bcr]) = (-?\d+\.\d\d)(?!\d)")
PUBLISHED = {"b = 0.37", "c = 0.62", "b = 0.50", "c = 0.50", "r = 0.98"}  # [A]'s, not ours
RESULTS = re.compile(r"^lab/.*RESULTS[^/]*\.md$")


def pages() -> list[str]:
    """The tracked (and new, not ignored) markdown files and notebooks, relative to the root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md", "*.ipynb"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(p for p in listed if (ROOT / p).is_file())


def text_of(path: str) -> str:
    """A page's text; a notebook's markdown cells only."""
    raw = (ROOT / path).read_text(encoding="utf-8")
    if not path.endswith(".ipynb"):
        return raw
    cells = json.loads(raw)["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@cache
def _counts() -> list[tuple[float, float]]:
    """The Clopper-Pearson 95% intervals of every k of n <= 30."""
    return [
        (
            0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1)),
            1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k)),
        )
        for n in range(1, 31)
        for k in range(n + 1)
    ]


def count_interval(low: str, high: str) -> bool:
    """Whether ``[low, high]`` is the Clopper-Pearson 95% interval of some k of n <= 30, at the
    printed decimals.

    >>> count_interval("0.00", "0.52"), count_interval("0.28", "0.99")
    (True, True)
    >>> count_interval("0.17", "1.63"), count_interval("0.15", "0.91")
    (False, False)
    """
    decimals = len(low.split(".")[1]) if "." in low else 0
    return any(f"{lo:.{decimals}f}" == low and f"{hi:.{decimals}f}" == high for lo, hi in _counts())


def findings(text: str) -> set[str]:
    """The findings quoted in ``text``.

    >>> sorted(findings("b = 0.90 [0.17, 1.63]; c = 1.76; b = 0.37 (A); PS in [0, 1]; n = 10"))
    ['[0.17, 1.63]', 'b = 0.90', 'c = 1.76']
    >>> sorted(findings("0.20 [0.01, 0.72] (Clopper-Pearson, 5 seeds); r = 0.69 [0.15, 0.91]"))
    ['[0.15, 0.91]', 'r = 0.69']
    """
    out = set()
    for m in INTERVAL.finditer(text):
        low, high = m.groups()
        if not any(c in low + high for c in ".,"):
            continue  # a range of whole numbers
        if count_interval(low, high):
            continue
        out.add(m.group(0))
    out |= {f"{m[1]} = {m[2]}" for m in POINT.finditer(text)} - PUBLISHED
    return out


def copies(texts: dict[str, str]) -> dict[str, list[str]]:
    """Each finding quoted in more than one of ``texts`` (path -> text), with where.

    >>> copies({"lab/a/RESULTS.md": "[0.80, 2.73]", "x.md": "c: [0.80, 2.73]"})
    {'[0.80, 2.73]': ['lab/a/RESULTS.md', 'x.md']}
    >>> copies({"lab/a/RESULTS.md": "[0.80, 2.73]", "x.md": "see the findings page"})
    {}
    >>> copies({"lab/a/RESULTS.md": "c = 1.76", "x.md": "c = 1.76", "y.md": "c = 1.76"})
    {'c = 1.76': ['lab/a/RESULTS.md', 'x.md', 'y.md']}
    """
    where = defaultdict(set)
    for path, text in texts.items():
        for finding in findings(text):
            where[finding].add(path)
    return {k: sorted(v) for k, v in sorted(where.items()) if len(v) > 1}


def test_the_check_finds_a_copied_finding_and_passes_a_link():
    rendered = "- c = 1.76 [0.80, 2.73] (Tobit ML): **disagrees**"
    copied = {"lab/s/RESULTS.md": rendered, "m.md": "c = 1.76 [0.80, 2.73], disagrees"}
    both = ["lab/s/RESULTS.md", "m.md"]
    assert copies(copied) == {"[0.80, 2.73]": both, "c = 1.76": both}
    linked = {"lab/s/RESULTS.md": rendered, "m.md": "See [the findings](findings/law.md)."}
    assert copies(linked) == {}
    alone = {"lab/s/RESULTS.md": rendered, "README.md": "the grid gives c = 1.76, so"}
    assert copies(alone) == {"c = 1.76": ["README.md", "lab/s/RESULTS.md"]}


def test_every_finding_lives_in_exactly_one_tracked_file():
    listed = pages()
    assert "lab/studies/natural_law/RESULTS.md" in listed  # the results files are read
    texts = {path: text_of(path) for path in listed}
    found = copies(texts)
    assert found == {}, "\n".join(f"{k}: {', '.join(v)}" for k, v in found.items())
