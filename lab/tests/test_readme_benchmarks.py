"""The fast path's memory and time table in docs/fast-scores.md quotes what
``lab/benchmarks/RESULTS_fastpath.md`` measured: each row's memory ratio and pairs / patterns time
are the results file's for that model and context. A rerun that moves a ratio fails here until
the prose follows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "lab" / "benchmarks" / "RESULTS_fastpath.md"
# a docs row: | Pythia-160m[ config] | 2,048 | ... | 11.4x | 0.78 | (docs: a floor column)
QUOTED = re.compile(r"^\| Pythia-(\w+)(?: config)? \| ([\d,]+) \|.*?(\d+\.\d)x \| (\d\.\d\d) \|")


def measured(results: str) -> dict[tuple[str, int], tuple[str, float]]:
    """(model, context) -> (memory ratio as printed, pairs s / pattern s) of every table row.

    >>> row = "| 160m | 2048 | 12 | 1 | 11.39 | 8.94 | 1.27x | 0.449 | 0.039 | 11.4x | 0.037 | 0 |"
    >>> memory, time = measured(row)[("160m", 2048)]
    >>> memory, round(time, 2)
    ('11.4', 0.78)
    """
    found = {}
    for line in results.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 12 and cells[1].isdigit():
            pattern_s, pairs_s = float(cells[4]), float(cells[5])
            found[(cells[0], int(cells[1]))] = (cells[9].rstrip("x"), pairs_s / pattern_s)
    return found


def mismatches(text: str, results: str) -> list[str]:
    """The quoted rows of ``text`` whose ratios are not the results file's."""
    table = measured(results)
    wrong = []
    for line in text.splitlines():
        if (m := QUOTED.match(line)) is None:
            continue
        key = (m.group(1), int(m.group(2).replace(",", "")))
        memory, time = table.get(key, (None, None))
        if memory != m.group(3) or time is None or f"{time:.2f}" != m.group(4):
            wrong.append(line)
    return wrong


def quoted_rows(text: str) -> int:
    return sum(QUOTED.match(line) is not None for line in text.splitlines())


def test_the_check_finds_a_ratio_the_results_do_not_hold():
    results = RESULTS.read_text()
    good = "| Pythia-160m config | 2,048 | 12 | 11.4x | 0.78 |"
    assert mismatches(good, results) == [] and quoted_rows(good) == 1
    for bad in (good.replace("11.4x", "11.8x"), good.replace("0.78", "0.62")):
        assert mismatches(bad, results) == [bad]


def test_the_docs_quote_the_fast_paths_measured_ratios():
    results = RESULTS.read_text()
    for path in (ROOT / "docs" / "fast-scores.md",):  # the README quotes no measurement
        text = path.read_text()
        assert quoted_rows(text) == 4, path  # 160m and 410m at 2,048 and 8,192 tokens
        assert mismatches(text, results) == [], path
