"""The benchmarks' results files: a named section of a markdown file replaced atomically, each
section's hardware line, and the checks a job runs before any work so that it never fails at its
last line.

>>> section_problem(Path("R.md"), "two words")
"section 'two words': use letters, digits, '.', '_', ':' or '-'"
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import torch


def where(device: str) -> str:
    """The hardware a benchmark ran on (a GPU's name, or CPU cores), for its results' header."""
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(torch.device(device))} ({device})"
    return f"{os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}"


def section_problem(path: Path, name: str) -> str | None:
    """Why ``write_section(path, name, ...)`` would fail or spoil ``path``, else None: a name
    that is not one word (letters, digits, ``.``, ``_``, ``:``, ``-``), a folder, a file that is
    not UTF-8 text, or a section begun and not ended. Checked before any work, so a job never
    runs to a traceback at its last line.

    >>> section_problem(Path("no/such/folder/R.md"), "cuda")
    "--results 'no/such/folder/R.md': its folder does not exist"
    """
    if not re.fullmatch(r"[\w.:-]+", name):
        return f"section {name!r}: use letters, digits, '.', '_', ':' or '-'"
    if path.is_dir() or not path.parent.is_dir():
        what = "is a folder" if path.is_dir() else "its folder does not exist"
        return f"--results {str(path)!r}: {what}"
    if not path.exists():
        return None
    try:
        old = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        return f"--results {str(path)!r}: not a UTF-8 text file ({type(err).__name__})"
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    if old.count(begin) > 1 or (begin in old and end not in old.split(begin, 1)[1]):
        return f"--results {str(path)!r}: its section {name!r} is not one begin/end pair"
    return None


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the text between ``<!-- begin NAME -->`` and ``<!-- end NAME -->`` in ``path``,
    atomically; ValueError where :func:`section_problem` finds one."""
    problem = section_problem(path, name)
    if problem:
        raise ValueError(problem)
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    old = path.read_text() if path.is_file() else f"{begin}\n{end}\n"
    if begin not in old:
        old += f"\n{begin}\n{end}\n"
    head, rest = old.split(begin, 1)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")
    partial.replace(path)
