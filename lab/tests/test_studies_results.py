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

from ihprobe import Prior
from lab.studies.__main__ import main as studies_main
from lab.studies.contrast import run as contrast
from lab.studies.forecast import cells as forecast_cells
from lab.studies.forecast import claims as forecast_claims
from lab.studies.forecast import run as forecast
from lab.studies.law import other
from lab.studies.law import run as law
from lab.studies.llc import claims as llc_claims
from lab.studies.llc import run as llc
from lab.studies.natural import run as natural
from lab.studies.study import STUDIES, load, recorded_header
from lab.studies.toy_law import run as toy_law

ROOT = Path(__file__).resolve().parents[2]
VIMDOC = ["--text", "/usr/share/vim/vim90/doc", "--label", "vimdoc"]


def copies(tmp_path: Path, folder: Path, names: list[str]) -> dict[str, Path]:
    """Copies of a study's results files in ``tmp_path``, by name."""
    for name in names:
        shutil.copy(folder / name, tmp_path / name)
    return {name: tmp_path / name for name in names}


def assert_same_bytes(made: dict[str, Path], folder: Path) -> None:
    for name, path in made.items():
        assert path.read_bytes() == (folder / name).read_bytes(), f"{name} re-rendered differently"


@pytest.mark.slow
def test_the_law_grid_rerenders_from_its_csv(tmp_path, monkeypatch):
    folder = ROOT / "lab" / "studies" / "law"
    names = ["RESULTS_papers_law.md", "RESULTS_papers_law.csv", other.MD]
    made = copies(tmp_path, folder, names)
    made[other.MD].unlink()  # drawn again from the run sets' CSVs beside the study
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
    folder = ROOT / "lab" / "studies" / "contrast"
    made = copies(tmp_path, folder, [f"{stem}.md", f"{stem}.csv"])
    monkeypatch.setattr(contrast, "HERE", tmp_path)
    contrast.main([*argv, "--report", "--from-csv"])
    assert_same_bytes(made, folder)


def test_the_natural_pilots_rerender_from_their_csv(tmp_path, monkeypatch):
    folder = ROOT / "lab" / "studies" / "natural"
    made = copies(tmp_path, folder, ["RESULTS_papers_natural.md", "RESULTS_papers_natural.csv"])
    recorded = re.search(r"\(train split, ([^)]*)\)", made["RESULTS_papers_natural.md"].read_text())
    monkeypatch.setattr(natural, "OUT_MD", made["RESULTS_papers_natural.md"])
    monkeypatch.setattr(natural, "OUT_CSV", made["RESULTS_papers_natural.csv"])
    monkeypatch.setattr(natural, "RUNS", tmp_path / "no-runs")  # the CSV alone
    monkeypatch.setattr(natural, "corpus_tokens", lambda: recorded.group(1))
    natural.main(["--report"])
    assert_same_bytes(made, folder)


def test_the_toy_law_rerenders_from_its_csv(tmp_path, monkeypatch):
    folder = ROOT / "lab" / "studies" / "toy_law"
    made = copies(tmp_path, folder, ["RESULTS_law.md", "RESULTS_law.csv"])
    monkeypatch.setattr(toy_law, "OUT_MD", made["RESULTS_law.md"])
    monkeypatch.setattr(toy_law, "OUT_CSV", made["RESULTS_law.csv"])
    toy_law.main(["--report"])
    assert_same_bytes(made, folder)


def test_a_rerender_keeps_the_recorded_provenance_and_a_run_writes_its_own(tmp_path, monkeypatch):
    folder = ROOT / "lab" / "studies" / "toy_law"
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


def test_the_forecast_rerenders_from_its_csvs(tmp_path, monkeypatch):
    """Its tables and the natural pilots' section are the CSVs' own; the lines above the tables
    name the runs' wall times, earlier runs and refitted prior, which only the run folders hold,
    and ``--report`` keeps them (the next test checks the code writes them so)."""
    folder = ROOT / "lab" / "studies" / "forecast"
    names = ["RESULTS_forecast.md", "RESULTS_forecast.csv", "RESULTS_forecast_natural.csv"]
    made = copies(tmp_path, folder, names)
    monkeypatch.setattr(forecast, "OUT_MD", made["RESULTS_forecast.md"])
    monkeypatch.setattr(forecast, "OUT_CSV", made["RESULTS_forecast.csv"])
    monkeypatch.setattr(forecast, "NATURAL_CSV", made["RESULTS_forecast_natural.csv"])
    made["RESULTS_forecast.md"].write_text(
        "\n".join(recorded_header((folder / names[0]).read_text()))
    )  # the header alone: every line below it is drawn again
    studies_main(["forecast", "--report"])
    assert_same_bytes(made, folder)


def test_the_forecast_header_is_what_the_code_writes_from_the_runs_facts():
    """Given the facts the recorded header states (times, earlier runs, the refitted prior), the
    code writes that header: the configuration in ``cells.py`` is the one measured."""
    text = (ROOT / "lab" / "studies" / "forecast" / "RESULTS_forecast.md").read_text()
    table = pd.read_csv(ROOT / "lab" / "studies" / "forecast" / "RESULTS_forecast.csv")
    recorded = recorded_header(text)
    times = re.search(r"took (\d+) s .*invocation (\d+) s", text, re.S)
    earlier = re.search(r"B\^-0.37: (.*)\. The refit uses the runs with a transition", text)
    priors = {
        "[A] law": Prior(15788.0, 0.3, "fitted", 32, 64),
        "refit (B16, B64)": Prior(228.0, 0.3, "fitted", 32, 64, runs=1),
    }
    facts = {
        "train_s": float(times.group(1)),
        "wall_s": float(times.group(2)),
        "earlier": earlier.group(1).split("; "),
    }
    command = table.command.iloc[0]
    assert forecast_claims.header(table, command, priors, facts) == recorded
    assert "d64, 4 heads" in text and forecast_cells.DEMO.d_model == 64


def test_the_llc_rerenders_from_its_csv(tmp_path, monkeypatch):
    """The table and the checks are the CSV's own; the lines above the table (timing, the run's
    settings) and the stage sentence, which needs the run's PS point, are kept as recorded."""
    folder = ROOT / "lab" / "studies" / "llc"
    made = copies(tmp_path, folder, ["RESULTS_llc.md", "RESULTS_llc.csv"])
    monkeypatch.setattr(llc, "OUT_MD", made["RESULTS_llc.md"])
    monkeypatch.setattr(llc, "OUT_CSV", made["RESULTS_llc.csv"])
    recorded = made["RESULTS_llc.md"].read_text()
    stage = f"- {llc_claims.recorded_stage(recorded)}"
    kept = [*recorded_header(recorded), "| no table |", "", stage]
    made["RESULTS_llc.md"].write_text("\n".join(kept))  # the table and checks drawn again
    studies_main(["llc", "--report"])
    assert_same_bytes(made, folder)


# the change-point fit is an optimiser: under other numpy kernels (OPENBLAS_CORETYPE=Sandybridge
# on this project's AMD EPYC) the LLC change point moves from 350 to 348 updates (issue 58), so
# the recorded sentence agrees with the CSV within a fifth of the 25-update checkpoint spacing
LLC_POINT_TOLERANCE = 5.0


def test_the_llc_stage_sentence_states_the_change_point_of_its_csv():
    """The recorded sentence's LLC change point is the one the CSV's estimates give, within the
    optimiser's spread across CPU kernels (``LLC_POINT_TOLERANCE`` updates)."""
    from ihprobe import SGLDSettings, llc_stages
    from ihprobe.dynamics.llc import LLCTrajectory

    folder = ROOT / "lab" / "studies" / "llc"
    frame = pd.read_csv(folder / "RESULTS_llc.csv")
    stage = llc_stages(LLCTrajectory(frame, pd.DataFrame(), SGLDSettings(), "r"))
    said = llc_claims.recorded_stage((folder / "RESULTS_llc.md").read_text())
    quoted = re.search(r"LLC change point \(([\d,]+) updates\)", said)
    assert stage.transition and quoted, said
    assert abs(float(quoted.group(1).replace(",", "")) - stage.updates) <= LLC_POINT_TOLERANCE
