"""Every notebook in notebooks/ is committed without outputs and runs top to bottom."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_scan_a_checkpoint.ipynb",
        "02_watch_heads_emerge.ipynb",
        "03_causal_ablation.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    monkeypatch.setenv("IHPROBE_NOTEBOOK_SMALL", "1")  # notebooks shrink their settings
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(
        "PYTHONPATH", str(path.parent.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    assert any(c.outputs for c in nb.cells if c.cell_type == "code")
