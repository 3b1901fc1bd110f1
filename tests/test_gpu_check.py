"""benchmarks/gpu_check.sh parses, and the Python it runs imports and records sections."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_script_parses():
    done = subprocess.run(["bash", "-n", str(BENCHMARKS / "gpu_check.sh")], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_benchmarks_the_script_runs_import():
    scale, train = module("bench_scale"), module("bench_train")
    assert set(scale.TASKS) <= set(scale.MEASURES) and callable(train.main)
    for size, cfg in scale.PYTHIA.items():  # every Pythia model has 64-dimensional heads
        assert cfg["hidden_size"] // cfg["num_attention_heads"] == 64, size


def test_write_section_replaces_only_its_own_section(tmp_path):
    write_section = module("bench_scale").write_section
    results = tmp_path / "RESULTS.md"
    results.write_text("# title\n\n<!-- begin gpu -->\nnot yet measured\n<!-- end gpu -->\ntail\n")
    write_section(results, "gpu", "H200: 1.1x")
    write_section(results, "cpu", "2 cores: 1.2x")
    write_section(results, "gpu", "H200: 1.0x")
    text = results.read_text()
    assert "not yet measured" not in text and "H200: 1.1x" not in text
    assert text.startswith("# title\n") and "tail\n" in text
    assert text.count("H200: 1.0x") == 1 and text.count("2 cores: 1.2x") == 1
