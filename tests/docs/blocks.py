"""The fenced code blocks of the README and of docs/, and their ``<!-- no-run: REASON -->``
marks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
NO_RUN = re.compile(r"<!-- no-run: ([^>]+?) -->\s*\Z")


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository
    line: int  # line of the opening fence
    language: str  # python, bash, ...
    code: str
    no_run: str | None  # the reason given in a no-run mark on the line before it

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """The README and every Markdown page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(languages=("python", "bash")) -> list[Block]:
    """Every fenced block in ``languages`` on :func:`pages`.

    >>> all(b.language in ("python", "bash") for b in blocks())
    True
    """
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) not in languages:
                continue
            mark = NO_RUN.search(text[: m.start()])
            found.append(
                Block(
                    page=str(page.relative_to(ROOT)),
                    line=text.count("\n", 0, m.start()) + 1,
                    language=m.group(1),
                    code=m.group(2),
                    no_run=mark.group(1) if mark else None,
                )
            )
    return found


def commands(code: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments dropped.

    >>> commands("ihprobe scan X \\\\\\n    --out Y   # a comment\\nihprobe info X")
    ['ihprobe scan X --out Y', 'ihprobe info X']
    """
    joined = re.sub(r"\\\n\s*", "", code)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [re.sub(r"\s+", " ", line) for line in lines if line and not line.startswith("#")]
