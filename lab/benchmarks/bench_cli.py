"""The command line's latency: help, refusals and a scan of the reference checkpoint, side by side
with the imports they cannot avoid.

Each row is one subprocess, run ``--runs`` times (median shown), so start-up imports are
counted: CPU is user + system of the child (``resource.RUSAGE_CHILDREN``), the cost on an idle
machine; wall depends on the load. The yardsticks are ``import torch`` and
``import transformer_lens.model_bridge``: a scan must load the bridge, so its CPU beyond that
import is what ihprobe itself costs (the target: help and refusals <= 1 s, the scan <= 4 s, or
<= 2 s beyond the bridge's import where that import alone is over 2 s).

Run: ``.venv/bin/python lab/benchmarks/bench_cli.py`` (``--write`` updates
``lab/benchmarks/RESULTS_cli.md``).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = str(ROOT / "reference" / "natural-docs")
IHPROBE = [sys.executable, "-m", "ihprobe"]


def timed(command: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def rows(scratch: Path) -> list[tuple[str, list[str]]]:
    """(name, command) of every row; the scan writes into a new folder each run."""
    return [
        ("import torch", [sys.executable, "-c", "import torch"]),
        (
            "import transformer_lens.model_bridge",
            [sys.executable, "-c", "import transformer_lens.model_bridge"],
        ),
        ("ihprobe --help", [*IHPROBE, "--help"]),
        ("ihprobe scan --help", [*IHPROBE, "scan", "--help"]),
        ("ihprobe ablate --help", [*IHPROBE, "ablate", "--help"]),
        ("refusal: scan --metrics bogus", [*IHPROBE, "scan", REFERENCE, "--metrics", "bogus"]),
        ("refusal: scan of a missing path", [*IHPROBE, "scan", str(scratch / "missing")]),
        ("ihprobe metrics", [*IHPROBE, "metrics"]),
        ("scan reference/natural-docs", [*IHPROBE, "scan", REFERENCE, "--out", "NEW"]),
    ]


def measure(runs: int) -> tuple[list[tuple[str, float, float, int]], float]:
    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    load = os.getloadavg()[0]
    found = []
    for name, command in rows(scratch):
        walls, cpus, codes = [], [], set()
        for run in range(runs):
            # a new output folder and an empty results cache: the scan does its work each time
            env = {**os.environ, "IHPROBE_CACHE": str(scratch / f"cache-{name}-{run}")}
            argv = [str(scratch / f"out-{run}") if part == "NEW" else part for part in command]
            wall, cpu, code = timed(argv, env)
            walls.append(wall)
            cpus.append(cpu)
            codes.add(code)
        found.append((name, statistics.median(walls), statistics.median(cpus), max(codes)))
    return found, max(load, os.getloadavg()[0])


def table(found, load: float, runs: int) -> str:
    cpu = {name: c for name, _, c, _ in found}
    beyond = cpu["scan reference/natural-docs"] - cpu["import transformer_lens.model_bridge"]
    lines = [
        "# CLI latency",
        "",
        f"Median of {runs} subprocesses per row ({sys.version.split()[0]}, {os.cpu_count()} "
        f"cores, {platform.machine()}, load average up to {load:.1f}); CPU is user + system.",
        "",
        "| command | exit | wall s | CPU s |",
        "|---|---:|---:|---:|",
        *[f"| {name} | {code} | {wall:.2f} | {c:.2f} |" for name, wall, c, code in found],
        "",
        f"The scan's CPU beyond `import transformer_lens.model_bridge`: {beyond:.2f} s.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="subprocesses per row")
    parser.add_argument("--write", action="store_true", help="update RESULTS_cli.md")
    args = parser.parse_args()
    found, load = measure(args.runs)
    text = table(found, load, args.runs)
    print(text, end="")
    if args.write:
        (Path(__file__).parent / "RESULTS_cli.md").write_text(text)


if __name__ == "__main__":
    main()
