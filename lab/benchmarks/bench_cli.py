"""The command line's latency: help, refusals and a scan of the reference checkpoint, side by side
with the imports they cannot avoid.

Each row is one subprocess, run ``--runs`` times (median shown), so start-up imports are
counted: CPU is user + system of the child (``resource.RUSAGE_CHILDREN``), the cost on an idle
machine; wall depends on the load. The yardsticks are ``import torch`` and
``import transformer_lens.model_bridge``: a scan must load the bridge, so its CPU beyond that
import is what ihprobe itself costs (the target: help and refusals <= 1 s, the scan <= 4 s, or
<= 2 s beyond the bridge's import where that import alone is over 2 s); a second table sets each
measure beside its target, and the scan's CPU as a multiple of the bridge's import.

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


SCAN, BRIDGE = "scan reference/natural-docs", "import transformer_lens.model_bridge"
HELP_TARGET, SCAN_TARGET, BEYOND_TARGET = 1.0, 4.0, 2.0  # CPU seconds (issue 59, item 8)


def measure(runs: int) -> tuple[list[tuple[str, float, list[float], int]], float]:
    """Each row ``runs`` times, the rows interleaved (run 1 of every row, then run 2, ...), so a
    change of the machine's load falls on every row alike and the differences stay fair."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    # ihprobe's bytecode, as an installed package has it (pip compiles at install; an editable
    # install on its first run): under PYTHONDONTWRITEBYTECODE each run would compile its
    # sources again, 0.1-0.25 s that no user pays twice
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "ihprobe")], check=True)
    load = os.getloadavg()[0]
    table = rows(scratch)
    walls, cpus, codes = ({name: [] for name, _ in table} for _ in range(3))
    for run in range(runs):
        for name, command in table:
            # a new output folder and an empty results cache: the scan does its work each time
            env = {**os.environ, "IHPROBE_CACHE": str(scratch / f"cache-{name}-{run}")}
            argv = [str(scratch / f"out-{run}") if part == "NEW" else part for part in command]
            wall, cpu, code = timed(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
            codes[name].append(code)
    found = [
        (name, statistics.median(walls[name]), cpus[name], max(codes[name])) for name, _ in table
    ]
    return found, max(load, os.getloadavg()[0])


def verdicts(found) -> list[tuple[str, float, float]]:
    """(what, measured CPU s, target CPU s) of each target, from the rows' median CPU; the scan
    beyond the bridge's import is the median of the per-run differences (runs interleaved)."""
    cpu = {name: c for name, _, c, _ in found}
    light = [name for name in cpu if name.startswith(("ihprobe --help", "ihprobe scan --help"))]
    light += [name for name in cpu if name.startswith(("ihprobe ablate --help", "refusal:"))]
    beyond = [s - b for s, b in zip(cpu[SCAN], cpu[BRIDGE], strict=True)]
    return [
        ("slowest --help or refusal", max(statistics.median(cpu[n]) for n in light), HELP_TARGET),
        ("scan of the reference checkpoint", statistics.median(cpu[SCAN]), SCAN_TARGET),
        (f"the scan beyond `{BRIDGE}`", statistics.median(beyond), BEYOND_TARGET),
    ]


def table(found, load: float, runs: int) -> str:
    cpu = {name: statistics.median(c) for name, _, c, _ in found}
    targets = verdicts(found)
    ratio = cpu[SCAN] / cpu[BRIDGE]
    lines = [
        "# CLI latency",
        "",
        f"Median of {runs} subprocesses per row, rows interleaved ({sys.version.split()[0]}, "
        f"{os.cpu_count()} cores, {platform.machine()}, load average up to {load:.1f}); CPU is "
        "user + system of the child, [min, max] over the runs; ihprobe's bytecode compiled "
        "first, as an installed package has it.",
        "",
        "| command | exit | wall s | CPU s | CPU [min, max] |",
        "|---|---:|---:|---:|---|",
        *[
            f"| {name} | {code} | {wall:.2f} | {statistics.median(c):.2f} | "
            f"[{min(c):.2f}, {max(c):.2f}] |"
            for name, wall, c, code in found
        ],
        "",
        "| target (issue 59, item 8) | CPU s | at most | met |",
        "|---|---:|---:|---|",
        *[
            f"| {what} | {value:.2f} | {limit:.1f} | {'yes' if value <= limit else 'no'} |"
            for what, value, limit in targets
        ],
        "",
        f"The scan costs {ratio:.2f} times the CPU of `{BRIDGE}` alone, which it cannot avoid "
        f"(`import torch`: {cpu['import torch']:.2f} s).",
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
        out = Path(__file__).parent / "RESULTS_cli.md"
        partial = out.with_suffix(".partial")  # written whole, then renamed over the old file
        partial.write_text(text)
        partial.replace(out)


if __name__ == "__main__":
    main()
