"""Run one step of the device job in its CPU mode, as the lab tests of its steps do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"


def run_step(step: str, folder: Path) -> str:
    """The results file the job writes after running ``step`` alone on the CPU on its tiny
    model, one thread; the job must exit 0 and record no failed step."""
    results = folder / "RESULTS_device.md"
    argv = [sys.executable, str(BENCHMARKS / "device_job.py"), "--device", "cpu", "--tiny"]
    argv += ["--results", str(results), "--steps", step]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    text = results.read_text()
    assert f"### {step} (" in text and "failed:" not in text, text
    return text
