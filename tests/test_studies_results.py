"""Every study's committed results files re-render byte for byte from their CSV of record through
the study's own entry point (``--report``): the tables, fits and verdicts are what the code
computes from the recorded rows, not text kept by hand. What a CSV cannot hold comes from the
recorded file: who ran the runs (the provenance lines ``--report`` keeps) and, for the natural
pilots, the size of the corpus built on the machine that ran them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ihprobe.jobs.grid import markdown
from studies.__main__ import main as studies_main
from studies.contrast import run as contrast
from studies.forecast import run as forecast
from studies.law import run as law
from studies.natural import run as natural
from studies.study import STUDIES, load
from studies.toy_law import run as toy_law

ROOT = Path(__file__).resolve().parents[1]
VIMDOC = ["--text", "/usr/share/vim/vim90/doc", "--label", "vimdoc"]


def copies(tmp_path: Path, folder: Path, names: list[str]) -> dict[str, Path]:
    """Copies of a study's results files in ``tmp_path``, by name."""
    for name in names:
        shutil.copy(folder / name, tmp_path / name)
    return {name: tmp_path / name for name in names}


def assert_same_bytes(made: dict[str, Path], folder: Path) -> None:
    for name, path in made.items():
        assert path.read_bytes() == (folder / name).read_bytes(), f"{name} re-rendered differently"


def test_the_law_grid_rerenders_from_its_csv(tmp_path, monkeypatch):
    folder = ROOT / "studies" / "law"
    made = copies(tmp_path, folder, ["RESULTS_papers_law.md", "RESULTS_papers_law.csv"])
    monkeypatch.setattr(law, "OUT_MD", made["RESULTS_papers_law.md"])
    monkeypatch.setattr(law, "OUT_CSV", made["RESULTS_papers_law.csv"])
    law.main(["--report", "--from-csv"])
    assert_same_bytes(made, folder)


@pytest.mark.parametrize(
    "argv, stem",
    [
        ([], "RESULTS_papers_contrast"),
        (VIMDOC, "RESULTS_papers_contrast-vimdoc"),
        (["--recipe", "docs"], "RESULTS_papers_contrast-docs"),
    ],
)
def test_each_contrast_rerenders_from_its_csv(tmp_path, monkeypatch, argv, stem):
    folder = ROOT / "studies" / "contrast"
    made = copies(tmp_path, folder, [f"{stem}.md", f"{stem}.csv"])
    monkeypatch.setattr(contrast, "HERE", tmp_path)
    contrast.main([*argv, "--report", "--from-csv"])
    assert_same_bytes(made, folder)


def test_the_natural_pilots_rerender_from_their_csv(tmp_path, monkeypatch):
    folder = ROOT / "studies" / "natural"
    made = copies(tmp_path, folder, ["RESULTS_papers_natural.md", "RESULTS_papers_natural.csv"])
    recorded = re.search(r"\(train split, ([^)]*)\)", made["RESULTS_papers_natural.md"].read_text())
    monkeypatch.setattr(natural, "OUT_MD", made["RESULTS_papers_natural.md"])
    monkeypatch.setattr(natural, "OUT_CSV", made["RESULTS_papers_natural.csv"])
    monkeypatch.setattr(natural, "RUNS", tmp_path / "no-runs")  # the CSV alone
    monkeypatch.setattr(natural, "corpus_tokens", lambda: recorded.group(1))
    natural.main(["--report"])
    assert_same_bytes(made, folder)


def test_the_toy_law_rerenders_from_its_csv(tmp_path, monkeypatch):
    folder = ROOT / "studies" / "toy_law"
    made = copies(tmp_path, folder, ["RESULTS_law.md", "RESULTS_law.csv"])
    monkeypatch.setattr(toy_law, "OUT_MD", made["RESULTS_law.md"])
    monkeypatch.setattr(toy_law, "OUT_CSV", made["RESULTS_law.csv"])
    toy_law.main(["--report"])
    assert_same_bytes(made, folder)


def test_a_rerender_keeps_the_recorded_provenance_and_a_run_writes_its_own(tmp_path, monkeypatch):
    folder = ROOT / "studies" / "toy_law"
    made = copies(tmp_path, folder, ["RESULTS_law.md", "RESULTS_law.csv"])
    monkeypatch.setattr(toy_law, "OUT_MD", made["RESULTS_law.md"])
    assert toy_law.recorded_command() == ".venv/bin/python benchmarks/validate_law.py --report"
    made["RESULTS_law.md"].unlink()  # no record: the command that runs now
    assert toy_law.recorded_command() is None


def test_every_study_loads_and_names_results_files_that_exist(capsys):
    for name in STUDIES:
        study = load(name)
        assert study.name == name and study.results
        assert all((study.folder / f).is_file() for f in study.results), name
    assert studies_main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in STUDIES)
    assert studies_main(["no-such-study"]) == 2


def block_in(lines: list[str], text: str) -> bool:
    """Whether ``lines`` stand in ``text`` as one contiguous block."""
    return "\n".join(lines) in text


def test_the_forecast_tables_rerender_from_their_csvs():
    """The forecast's header names its runs' wall times and refitted prior, which only the run
    folders hold; its tables and the natural pilots' section are the CSVs' own."""
    folder = ROOT / "studies" / "forecast"
    text = (folder / "RESULTS_forecast.md").read_text()
    table = pd.read_csv(folder / "RESULTS_forecast.csv")
    natural_rows = pd.read_csv(folder / "RESULTS_forecast_natural.csv")
    summary = markdown(forecast.summary(table.drop(columns="command")))
    assert len(summary) > 4 and block_in(summary, text)
    assert block_in(forecast.natural_lines(natural_rows), text)
    assert text.endswith("\n".join(forecast.natural_lines(natural_rows)))


def test_the_llc_table_rerenders_from_its_csv():
    """The LLC's change point needs the run; its table of estimates is the CSV's own."""
    folder = ROOT / "studies" / "llc"
    text = (folder / "RESULTS_llc.md").read_text()
    frame = pd.read_csv(folder / "RESULTS_llc.csv").drop(columns="command")
    assert len(frame) > 10 and block_in(markdown(frame), text)
