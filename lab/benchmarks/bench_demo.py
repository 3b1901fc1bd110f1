"""``make demo`` cold and warm: the whole demo as a new user runs it, timed side by side.

Cold: an empty ``IHPROBE_CACHE`` and a fresh output directory (trains, scans every checkpoint,
ablates, writes the report). Warm: the same command again (the finished run is reused and the
scans come from the cache). Each is one ``python -m ihprobe demo --quiet`` subprocess, so
start-up imports are counted. Wall time depends on what else the machine runs; CPU time
(user + system of the subprocess) is the uncontended estimate on a machine with spare cores,
so the table prints both and the load average.

It prints a markdown table and writes it to ``lab/benchmarks/RESULTS_demo.md``.
Run: ``.venv/bin/python lab/benchmarks/bench_demo.py`` (``--write`` to update the results file).
"""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

TARGET_S = 90.0  # cold `make demo` on 2 cores (issue 18)


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> str:
    root = Path(tempfile.mkdtemp(prefix="bench-demo-"))
    env = {**os.environ, "IHPROBE_CACHE": str(root / "cache")}
    command = [sys.executable, "-m", "ihprobe", "demo", "--out", str(root / "demo"), "--quiet"]
    load = os.getloadavg()[0]
    cold = timed(command, env)
    warm = timed(command, env)
    load = max(load, os.getloadavg()[0])
    rows = [("cold (empty cache, new run)", *cold), ("warm (same command again)", *warm)]
    lines = [
        "# Demo benchmark",
        "",
        f"`ihprobe demo` with its defaults, one subprocess each (torch {torch.__version__}, "
        f"{os.cpu_count()} cores, {platform.machine()}, load average up to {load:.1f}).",
        "",
        "| run | wall s | CPU s | wall / 90 s target |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {wall:.1f} | {cpu:.1f} | {wall / TARGET_S:.2f}x |"
            for name, wall, cpu in rows
        ],
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    text = main()
    print(text)
    if "--write" in sys.argv:
        (Path(__file__).parent / "RESULTS_demo.md").write_text(text + "\n")
