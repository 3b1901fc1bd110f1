"""The way in stays light: `--help` of every command and the refusal of a bad argument or path
import neither torch nor TransformerLens (read from ``sys.modules`` in a fresh process; the
CPU cost itself is measured by lab/benchmarks/bench_cli.py, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ihprobe.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformer_lens")
# the help pages that still import torch, and why (a ratchet: one that no longer does must leave)
KNOWN_HEAVY = {
    "weight-trajectory --help": "its metric names sit beside their torch scores",
}
# in one fresh process: each command line in turn, then which heavy modules it left imported
PROBE = """
import json, sys
from ihprobe.cli import main
argvs, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
found = {}
for argv in argvs:
    try:
        code = main(argv)
    except SystemExit as done:
        code = done.code
    found[" ".join(argv)] = [code, [m for m in heavy if m in sys.modules]]
print(json.dumps(found))
"""


def _imports(argvs: list[list[str]]) -> dict[str, list]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argvs), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_help_and_refusals_import_neither_torch_nor_transformer_lens(tmp_path):
    commands = sorted(build_parser().commands)
    assert {"scan", "ablate", "metrics", "demo"} <= set(commands)
    checkpoint = str(ROOT / "reference/natural-docs")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text('{"model_type": "gpt2"}')
    argvs = [["--help"], *([name, "--help"] for name in commands)]
    heavy = [argv for argv in argvs if " ".join(argv) in KNOWN_HEAVY]
    argvs = [argv for argv in argvs if argv not in heavy]
    refusals = [
        ["scan", checkpoint, "--metrics", "no_such_metric"],  # a bad value, read by the command
        ["scan", str(tmp_path / "missing")],  # a bad path
        ["scan", checkpoint + "/README.md"],  # a file, not a checkpoint
        ["ablate", str(no_weights)],  # a checkpoint folder without weights
        ["ablate", checkpoint, "--draws", "-1"],  # a bad flag value
        ["scan", checkpoint, "--no-such-flag"],  # an unknown flag
        ["metrics", "--vocab", "0"],
    ]
    found = _imports(argvs + refusals)  # light ones first: a heavy one would taint the rest
    for argv in argvs:
        assert found[" ".join(argv)] == [0, []], argv
    for argv in refusals:
        assert found[" ".join(argv)] == [2, []], argv


@pytest.mark.slow  # imports torch in a fresh process: about 2.5 s of CPU, 9 s under load
def test_the_probe_sees_a_heavy_import():
    """The check can fail: a command that does its work imports torch."""
    assert _imports([["metrics"]])["metrics"] == [0, ["torch"]]  # snippet chance levels


@pytest.mark.slow  # weight-trajectory's help imports TransformerLens: about 10 s of CPU
def test_the_known_heavy_help_pages_are_still_heavy():
    """A help page of KNOWN_HEAVY made light leaves the list (each in its own process)."""
    for line in KNOWN_HEAVY:
        code, heavy = _imports([line.split()])[line]
        assert code == 0 and "torch" in heavy, f"{line} is light now: remove it from KNOWN_HEAVY"


@pytest.mark.slow  # imports TransformerLens in a fresh process: about 7 s of CPU
def test_the_scan_leaves_out_imports_it_does_not_use():
    """``scipy.stats`` (about 0.5 s of CPU to import) serves FV tests and the dynamics'
    statistics, not a scan: the scan job's modules import it only where it is used."""
    probe = "import json, sys, ihprobe.jobs.scan; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "transformer_lens.model_bridge" in loaded  # the check sees what the scan imports
    assert "scipy.stats" not in loaded
