"""The device job refuses a degenerate flag in one line, exit status 2, before it runs a step or
touches its results file (issue 59, item 3): ``--steps`` naming no step of this mode (a typo such
as ``seeds-l`` ran nothing and replaced the recorded section with an empty table), ``--budget``
``nan``, ``inf``, ``0`` or ``-5``, and ``--limits`` with seconds that are not finite."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"


@pytest.fixture(scope="module")
def job():
    spec = importlib.util.spec_from_file_location("device_job", BENCHMARKS / "device_job.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.parametrize(
    "flags",
    [
        ["--steps", "seeds-l"],
        ["--steps", ","],
        ["--steps", "seeds-2"],  # a --tiny step: on a device it would run nothing
        ["--budget", "nan"],
        ["--budget", "-5"],
        ["--budget", "inf"],
        ["--budget", "0"],
        ["--limits", "seeds-1=nan"],
        ["--limits", "seeds-1=inf"],
        ["--limits", "seeds-1=-1"],
        ["--limits", "seeds-l=60"],
        ["--no-such-flag"],
    ],
)
def test_degenerate_flags_are_one_line_and_leave_the_results(job, tmp_path, capsys, flags):
    results = tmp_path / "RESULTS_device.md"
    results.write_text("## device-cuda\n\nthe recorded section\n")
    with pytest.raises(SystemExit) as done:
        job.main(["--results", str(results), *flags])
    assert done.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("device_job.py: error: "), captured.err
    assert captured.out == ""  # no step ran
    assert results.read_text() == "## device-cuda\n\nthe recorded section\n"


def test_the_steps_of_each_mode_are_accepted(job):
    parser = job.OneLineParser(prog="device_job.py")
    assert job.chosen_steps("seeds-2,correct-train", True, parser) == ["seeds-2", "correct-train"]
    everything = job.chosen_steps(None, False, parser)
    assert "seeds-16" in everything and "seeds-2" not in everything
    assert job.limits("seeds-1=0,correct-160m=200", parser) == {"seeds-1": 0, "correct-160m": 200}
    assert job.seconds("520") == 520
