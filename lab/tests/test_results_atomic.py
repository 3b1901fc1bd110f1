"""The studies' results files are written whole or not at all (issue 59, item 1): a write that
fails half way (a kill, a full disk) leaves the committed file as it was and no stray file
beside it; the same writer, not failing, does replace it (so the failing case is the writer's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from lab.studies.contrast import run as contrast
from lab.studies.natural_law import extend

HERE = Path(contrast.__file__).resolve().parent


def _half_then_fail(self, path, *args, **kwargs):
    """``DataFrame.to_csv`` that writes part of a table, then dies."""
    Path(path).write_text("arm,seed,status\nnatural,0,do")
    raise RuntimeError("killed mid-write")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _contrast_report(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """The contrast's report on its committed CSV, into copies of its committed files."""
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    shutil.copy(HERE / "RESULTS_papers_contrast.md", md)
    shutil.copy(HERE / "RESULTS_papers_contrast.csv", csv)
    monkeypatch.setattr(contrast, "results_files", lambda args: (md, csv))
    args = contrast.options(["--report", "--from-csv", "--out", str(tmp_path / "runs")])
    return args, md, csv


def test_a_contrast_report_that_dies_mid_write_leaves_both_files(tmp_path, monkeypatch):
    args, md, csv = _contrast_report(tmp_path, monkeypatch)
    before = _files(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(pd.DataFrame, "to_csv", _half_then_fail)
        with pytest.raises(Exception, match="killed mid-write"):
            contrast.report(args)
    assert _files(tmp_path) == before  # the old pair, byte for byte, and nothing else
    md.write_text("an older results file\n")
    contrast.report(args)  # the same writer, not failing: the file is rewritten
    assert md.read_text().startswith("# ") and set(_files(tmp_path)) == set(before)


def test_a_natural_law_record_that_dies_mid_write_leaves_the_old_one(tmp_path, monkeypatch):
    record = tmp_path / "results_extended.csv"
    record.write_text("cell,seed,max_ps\nB1-C64,0,0.3\n")
    monkeypatch.setattr(extend, "RECORD", record)
    row = {"cell": "B1-C64", "seed": 1, "max_ps": 0.4}
    with monkeypatch.context() as patched:
        patched.setattr(pd.DataFrame, "to_csv", _half_then_fail)
        with pytest.raises(Exception, match="killed mid-write"):
            extend.record(row)
    assert _files(tmp_path) == {record.name: b"cell,seed,max_ps\nB1-C64,0,0.3\n"}
    extend.record(row)
    assert list(pd.read_csv(record).seed) == [0, 1]
