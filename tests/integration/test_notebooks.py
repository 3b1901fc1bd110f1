"""The notebooks are committed executed, with a static image beside every figure, and they run
again top to bottom any number of times, in any order, on the demo's run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from ihprobe.figures.heads import DEFAULT_WIDTH, TITLE_CHAR_PX
from notebooks.execute import execute

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"


def outputs(book) -> list:
    return [o for c in book.cells if c.cell_type == "code" for o in c.outputs]


def text_of(book) -> str:
    return "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs(book)
    )


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_scan_a_checkpoint.ipynb",
        "02_watch_heads_emerge.ipynb",
        "03_causal_ablation.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_executed_with_static_figures(path):
    book = nbformat.read(path, as_version=4)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "run in order"
    assert not [c for c in code if "execution" in c.metadata], "run by notebooks/execute.py"
    assert not [o for o in outputs(book) if o.output_type == "error"]
    figures = [o for o in outputs(book) if PLOTLY in o.get("data", {})]
    assert figures, f"{path.name} shows no figure"
    for figure in figures:  # GitHub and a reader without a kernel see the PNG
        assert figure["data"].get("image/png"), f"{path.name}: a figure without a static image"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_fit_the_page(path):
    """No PNG title runs past its figure's width, and no table hides columns behind pandas'
    "..." (a wide table is shown transposed)."""
    book = nbformat.read(path, as_version=4)
    for output in outputs(book):
        data = output.get("data", {})
        if PLOTLY in data:
            layout = data[PLOTLY]["layout"]
            title = re.sub(r"<sub>.*?</sub>", "", (layout.get("title") or {}).get("text") or "")
            width = layout.get("width") or DEFAULT_WIDTH
            for line in title.split("<br>"):
                assert len(line) * TITLE_CHAR_PX <= width - 60, f"{path.name}: {line!r} cut"
        table = "".join(data.get("text/html", ""))
        if "<table" in table:
            assert ">...</th>" not in table, f"{path.name}: a table hides columns"


@pytest.mark.slow
def test_notebooks_run_twice_in_a_row_and_02_finds_the_transition(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("IHPROBE_NOTEBOOK_DIR", str(tmp_path / "demo"))  # one shared run
    monkeypatch.setenv("IHPROBE_REFERENCE", str(ROOT / "reference" / "natural-docs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    seconds = {}
    for round_ in (1, 2):  # the second round reuses the run and the cached scans
        for path in NOTEBOOKS:
            book, seconds[path.stem, round_] = execute(path, tmp_path)
            assert not [o for o in outputs(book) if o.output_type == "error"]
            if path.stem.startswith("02"):
                assert "transition detected: True" in text_of(book)
    print({k: round(v) for k, v in seconds.items()})
