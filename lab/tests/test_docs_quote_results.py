"""The README's validation section (and docs/science.md) quotes only what the committed results
files say: every interval it prints, ``estimate [low, high]``, is one of the results files'
intervals rounded to the README's digits, and each verdict of a validation row is the verdict its
results file chose. A rerun that moves a number or a verdict fails here until the README follows."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from lab.studies.contrast import heads

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]")


def validation_section(readme: str) -> str:
    """The README from its "Validation against the papers" heading to the next heading."""
    start = readme.index("## Validation against the papers")
    end = readme.find("\n## ", start + 3)
    return readme[start : end if end > 0 else None]


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


def test_every_interval_in_the_readme_validation_section_is_in_a_results_file():
    section = validation_section((ROOT / "README.md").read_text())
    results = "\n".join(p.read_text() for p in RESULTS_FILES)
    assert len(INTERVAL.findall(section)) > 20  # the section still quotes its intervals
    assert unsupported(section, results) == []
    assert unsupported((ROOT / "docs" / "science.md").read_text(), results) == []


# the results files: the studies' and the speed benchmarks'
RESULTS_FILES = sorted(
    [
        *(ROOT / "lab" / "studies").rglob("RESULTS*.md"),
        *(ROOT / "lab" / "benchmarks").glob("RESULTS_*.md"),
    ]
)
LAW, CONTRAST = "RESULTS_papers_law.md", "RESULTS_papers_contrast.md"
NATURAL, DOCS = "RESULTS_papers_natural.md", "RESULTS_papers_contrast-docs.md"


def claim(start: str) -> str:
    """A claims-table row whose claim starts with ``start``: its verdict cell."""
    return rf"\| {re.escape(start)}[^|]* \| ([^|]+?) \|"


def bold(after: str) -> str:
    """The first bold verdict after the text ``after`` (a regex) on its line."""
    return rf"{after}[^*\n]*\*\*([^*]+)\*\*"


PERPLEXITY = "natural-only reaches a lower natural-text perplexity than Bi-Induct"
MORE_CENTRAL = "natural-only circuits are more central and load-bearing than Bi-Induct"
HIGHER_ICL = "natural-only reaches a higher function-style ICL accuracy than Bi-Induct"
BI_INDUCT, REDUNDANT = ("forward", "backward", "balanced"), ("forward", "balanced")
CENTRAL = "natural-only models have a central, load-bearing"
# README validation row (its first cell's start) -> the verdicts its verdict cell must quote:
# (label the README puts before it or "", results file, pattern whose group is the verdict)
ROW_VERDICTS = {
    "emergence earlier with larger B": [("", LAW, r"\bb \*\*([^*]+)\*\*")],
    "emergence earlier with larger C": [("", LAW, r"\); c \*\*([^*]+)\*\*")],
    "b at a lower learning rate": [
        ("lr 3e-3", LAW, bold(r"- lr 3e-3 \(the grid\):")),
        ("lr 1e-3", LAW, bold(r"- lr 1e-3:")),
        ("lr 3e-4", LAW, bold(r"- lr 3e-4:")),
        ("the change in b from lr 1e-3", LAW, bold(r"- b at lr 1e-3 minus b at lr 3e-3")),
        ("from lr 3e-4", LAW, bold(r"- b at lr 3e-4 minus b at lr 3e-3")),
    ],
    "the slope at larger B": [
        ("32 -> 64", LAW, bold(r"b from B = 32 to 64:")),
        ("64 -> 128", LAW, bold(r"b from B = 64 to 128:")),
    ],
    "with the repetition in a row fixed": [("", LAW, bold(r"Tobit interval inside"))],
    "b with the warm-up fixed in tokens": [
        ("C = 32, 1% warm-up", LAW, bold(r"- b at C = 32, 1% warm-up:")),
        ("C = 128, 1% warm-up", LAW, bold(r"- b at C = 128, 1% warm-up:")),
        ("C = 32, warm-up in tokens", LAW, bold(r"- b at C = 32, warm-up in tokens:")),
        ("C = 128, warm-up in tokens", LAW, bold(r"- b at C = 128, warm-up in tokens:")),
        ("the change in b at C = 32", LAW, bold(r"minus b with a 1% warm-up at C = 32 ")),
        ("at C = 128", LAW, bold(r"minus b with a 1% warm-up at C = 128 ")),
    ],
    "emergence with natural text's repetition": [
        ("C = 32", LAW, bold(r"over repetition 0.9 at C = 32 \(added")),
        ("C = 64", LAW, bold(r"over repetition 0.9 at C = 64 \(added")),
        ("C = 128", LAW, bold(r"over repetition 0.9 at C = 128 \(added")),
        ("c with natural repetition", LAW, bold(r"- c from C = 32 to 64, natural repetition:")),
    ],
    "the emergence point does not depend on model size": [
        ("depth", LAW, bold(r"\(3 layers\):")),
        ("width", LAW, bold(r"\(width 128\):")),
    ],
    "no induction heads form on i.i.d. tokens": [
        ("", LAW, bold(r"no induction heads form on i.i.d. tokens:"))
    ],
    CENTRAL: [
        ("first contrast", CONTRAST, claim(CENTRAL)),
        ("natural recipe", DOCS, claim(CENTRAL)),
    ],
    "induction heads form from natural text on a CPU": [
        ("first recipe", NATURAL, bold(r"`d128-lr3e-3` within 3.0x")),
        ("attention-only", NATURAL, bold(r"`ao-d128` within 3.0x")),
        ("B = 16", NATURAL, bold(r"`d128-B16` within")),
        ("wider", NATURAL, bold(r"`d256-lr1e-3` within")),
        ("lr 1e-3", NATURAL, bold(r"`d128-lr1e-3` within")),
        ("2,048-id BPE", NATURAL, bold(r"`d128-bpe2048` within")),
        ("natural-text b against [A]'s 0.37 +- 0.15", NATURAL, bold(r"^- b = ")),
    ],
    "Bi-Induct forward raises forward induction above natural-only": [
        ("L = 20", CONTRAST, claim("Bi-Induct forward raises forward induction")),
        ("varied L", CONTRAST, claim("(issue 25) Bi-Induct forward's forward induction")),
        ("natural recipe, L = 20", DOCS, claim("Bi-Induct forward raises forward induction")),
        ("natural recipe, varied L", DOCS, claim("(issue 25) Bi-Induct forward's forward")),
    ],
    "anti-induction stays near zero even when trained on backward snippets": [
        ("anti-induction", CONTRAST, claim("anti-induction stays near zero")),
        ("copies backward", CONTRAST, claim("(issue 25) trained on backward snippets")),
        ("natural recipe, anti-induction", DOCS, claim("anti-induction stays near zero")),
        ("natural recipe, copies backward", DOCS, claim("(issue 25) trained on backward")),
    ],
    "natural-only models reach a lower natural-text perplexity than Bi-Induct ones": [
        *((arm, CONTRAST, claim(f"{PERPLEXITY} {arm}")) for arm in BI_INDUCT),
        *((f"natural recipe, {arm}", DOCS, claim(f"{PERPLEXITY} {arm}")) for arm in BI_INDUCT),
    ],
    "Bi-Induct circuits are more distributed and redundant than natural-only ones": [
        *((arm, CONTRAST, claim(f"Bi-Induct {arm}: a distributed")) for arm in REDUNDANT),
        *(
            (f"natural recipe, {arm}", DOCS, claim(f"Bi-Induct {arm}: a distributed"))
            for arm in REDUNDANT
        ),
    ],
    "natural-only circuits are more central and load-bearing than Bi-Induct ones": [
        (arm, DOCS, claim(f"{MORE_CENTRAL} {arm}")) for arm in BI_INDUCT
    ],
    "natural-only models reach a higher function-style ICL accuracy than Bi-Induct ones": [
        (arm, DOCS, claim(f"{HIGHER_ICL} {arm}")) for arm in BI_INDUCT
    ],
}


def results_files() -> dict[str, str]:
    return {
        name: next(p for p in RESULTS_FILES if p.name == name).read_text()
        for name in (LAW, CONTRAST, NATURAL, DOCS)
    }


def verdict_cells(section: str) -> dict[str, str]:
    """Each validation-table row's first cell -> its last (verdict) cell."""
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[-1].strip() for cells in rows if len(cells) >= 4}


def missing_verdicts(cells: dict[str, str], results: dict[str, str]) -> list[str]:
    """The verdicts of :data:`ROW_VERDICTS` that the README's row does not quote, as
    "row: expected" lines (a row or a results claim that is gone is listed too)."""
    out = []
    for start, sources in ROW_VERDICTS.items():
        row = next((cell for first, cell in cells.items() if first.startswith(start)), None)
        for label, name, pattern in sources:
            found = re.search(pattern, results[name], re.MULTILINE)
            if row is None or found is None:
                gone = "no README row" if row is None else f"{name} has no {pattern}"
                out.append(f"{start}: {gone}")
                continue
            expected = f"{label}: {found.group(1).strip()}" if label else found.group(1).strip()
            whole = rf"(?<!\w){re.escape(expected)}(?!\w)"  # "agrees" is not "disagrees"
            if not re.search(whole, row):
                out.append(f"{start}: {expected!r} not in {row!r}")
    return out


def test_the_verdict_check_flips_with_the_results():
    results = results_files()
    cells = verdict_cells(validation_section((ROOT / "README.md").read_text()))
    start = "emergence earlier with larger B"
    said = re.search(r"\bb \*\*([^*]+)\*\*", results[LAW]).group(1)
    other = "agrees" if said != "agrees" else "disagrees"
    flipped = {**results, LAW: results[LAW].replace(f"b **{said}**", f"b **{other}**", 1)}
    assert any(line.startswith(start) for line in missing_verdicts(cells, flipped))
    stale = {**cells, **{k: "pending" for k in cells if k.startswith(start)}}
    assert any(line.startswith(start) for line in missing_verdicts(stale, results))


def test_every_readme_verdict_is_its_results_files_verdict():
    results = results_files()
    cells = verdict_cells(validation_section((ROOT / "README.md").read_text()))
    assert missing_verdicts(cells, results) == []


def test_the_readme_quotes_the_natural_pilots_numbers_from_their_csv():
    """Post hoc corrections (issue 43): the first recipe's max PS at 30M tokens and the wall
    times per seed, read from the pilots' CSV of record."""
    readme = (ROOT / "README.md").read_text()
    pilots = pd.read_csv(ROOT / "lab" / "studies" / "natural" / "RESULTS_papers_natural.csv")
    first = pilots[pilots.pilot == "d128-lr3e-3"].set_index("seed")
    at_30m = [
        dict(item.split(": ") for item in first.loc[seed, "curve"].split(", "))["30.0"].split()[0]
        for seed in (1, 2, 4)
    ]
    assert f"they had {at_30m[0]}, {at_30m[1]} and {at_30m[2]}" in readme
    minutes = {
        name: pilots[pilots.pilot == name].train_s / 60 for name in ("d128-lr3e-3", "d256-lr1e-3")
    }
    first_recipe, wide = (f"{m.min():.0f}-{m.max():.0f}" for m in minutes.values())
    assert f"{wide} minutes of one core a seed against {first_recipe} for d_model 128" in readme


def test_the_readme_names_the_contrast_seeds_with_a_head_and_the_indices_left_out():
    readme = validation_section((ROOT / "README.md").read_text())
    frame = pd.read_csv(ROOT / "lab" / "studies" / "contrast" / "RESULTS_papers_contrast-docs.csv")
    yes, no = heads.headed_seeds(frame, "natural")
    assert f"natural seeds {' and '.join(map(str, yes))} pass" in readme
    natural = frame[frame.arm == "natural"].set_index("seed")
    left_out = ", ".join(f"{natural.loc[s, 'per-layer:load_bearing_index']:.2f}" for s in no)
    assert f"their indices ({left_out}) no longer count" in readme


def test_the_readme_says_whether_the_law_reruns_csv_exists():
    readme = (ROOT / "README.md").read_text()
    exists = (ROOT / "lab" / "studies" / "law" / "RESULTS_papers_law_reruns.csv").exists()
    assert ("none exist now" in readme) != exists
