"""The device job's ``offload`` step in its CPU mode (issue 62): a tiny 12-layer model split
across the CPU and the disk by ``device_map="auto"``; scan and ablate equal the model in one
place, and the job's results table records both timings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"


@pytest.mark.slow
def test_the_offload_step_splits_a_model_over_the_cpu_and_disk_and_agrees(tmp_path):
    results = tmp_path / "RESULTS_device.md"
    argv = [sys.executable, str(BENCHMARKS / "device_job.py"), "--device", "cpu", "--tiny"]
    argv += ["--results", str(results), "--steps", "offload"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    text = results.read_text()
    assert "### offload (" in text and "failed:" not in text, text
    rows = [line for line in text.splitlines() if "the CPU and the disk" in line]
    assert len(rows) == 2, text  # scan and ablate
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[-1]) <= 1e-5, row  # the largest difference from one device
