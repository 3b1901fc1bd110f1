"""A research command line checks where it will write before it runs anything (issue 59,
round 5): the device job's ``--results``, ``--section`` and ``--device`` are one line and exit
status 2 before its first step, never a traceback at its last line after the whole budget.

* ``--results`` a folder, in a folder that does not exist, a binary file, or a file whose
  section is begun and not ended (a half-written or hand-edited results file);
* ``--section`` that is not one word (a ``-->`` would end the marker early);
* ``--device`` that names no device here (every step would fail, and the failures would be
  recorded as the device's section).

Each leaves the file as it was.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"
CASES = {
    "results a folder": ("{tmp}/folder", []),
    "results in a missing folder": ("{tmp}/missing/RESULTS.md", []),
    "results binary": ("{tmp}/binary.md", []),
    "section begun, not ended": ("{tmp}/half.md", []),
    "section begun twice": ("{tmp}/twice.md", []),
    "section not one word": ("{tmp}/ok.md", ["--section", "x -->"]),
    "section with a newline": ("{tmp}/ok.md", ["--section", "a\nb"]),
    "device not a device": ("{tmp}/ok.md", ["--device", "nonsense"]),
    "device a missing GPU": ("{tmp}/ok.md", ["--device", "cuda:99"]),
}


@pytest.fixture
def job(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as when the script runs: bench_scale beside
    spec = importlib.util.spec_from_file_location("device_job", BENCHMARKS / "device_job.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def files(tmp: Path) -> dict[str, bytes]:
    (tmp / "folder").mkdir()
    (tmp / "binary.md").write_bytes(b"\xff\xfe\x00 not text")
    (tmp / "half.md").write_text("# mine\n<!-- begin device-tiny-cpu -->\nold table\n")
    twice = "<!-- begin device-tiny-cpu -->\na\n<!-- end device-tiny-cpu -->\n"
    (tmp / "twice.md").write_text(twice * 2)
    (tmp / "ok.md").write_text("# results\n")
    return {p.name: p.read_bytes() for p in tmp.iterdir() if p.is_file()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_results_target_is_one_line_before_any_step(job, tmp_path, capsys, case):
    before = files(tmp_path)
    results, flags = CASES[case]
    argv = ["--device", "cpu", "--tiny", "--steps", "seeds-2"]
    with pytest.raises(SystemExit) as done:
        job.main([*argv, "--results", results.replace("{tmp}", str(tmp_path)), *flags])
    assert done.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("device_job.py: error: "), captured.err
    assert captured.out == ""  # no step ran
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before


def test_a_section_is_written_whole_and_beside_the_others(job, tmp_path):
    scale = __import__("sections")
    results = tmp_path / "R.md"
    results.write_text("# title\n<!-- begin cpu -->\nold\n<!-- end cpu -->\ntail\n")
    scale.write_section(results, "cuda", "new")
    scale.write_section(results, "cpu", "newer")
    text = results.read_text()
    assert "old" not in text and text.count("newer") == 1 and text.count("new\n") == 1
    assert text.startswith("# title\n") and "tail\n" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.md"]  # no partial file left
