"""The scan of the demo's run: CPU seconds per checkpoint for every scan metric, with one torch
thread (``--threads``' default, ``ihprobe.core.threads``) against torch's own default, side by
side in one process.

Each route sweeps the demo's checkpoints with ``ihprobe.trajectory``, uncached and without
read-ahead, as ``ihprobe scan RUN`` sweeps them (one skeleton, weights swapped per checkpoint,
``scan`` of every metric: the repeated-token pass, the two snippet passes and the weight
scores; the ICL score needs text and is left out), routes interleaved over ``--repeats``
rounds; the best round counts. Target: at most 1.5 s of CPU per checkpoint.

    .venv/bin/python lab/benchmarks/bench_scan_demo.py [--run runs/demo/main] [--write]

Without ``--run`` (or when it is missing) the demo's main run is trained first into a
temporary folder (about a minute). ``--write`` stores the table in
lab/benchmarks/RESULTS_scan_demo.md.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

import ihprobe
from ihprobe import DemoConfig, demo_run

# the package's default thread count, as its public calls take it
DEFAULT_THREADS = inspect.signature(ihprobe.trajectory).parameters["threads"].default

RESULTS = Path(__file__).with_name("RESULTS_scan_demo.md")
TARGET_S = 1.5  # CPU seconds per checkpoint, all metrics


def sweep(run: Path, threads: int | None) -> tuple[float, float, int]:
    """(CPU s, wall s, checkpoints) of scanning every checkpoint with ``threads``."""
    wall, cpu = time.perf_counter(), time.process_time()
    ihprobe.trajectory(run, cache=False, progress=False, threads=threads, prefetch=0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return cpu, wall, len(ihprobe.checkpoints(run))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="the demo's main run (default: train one)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run and Path(args.run).is_dir() else None
        if run is None:
            run = demo_run(tmp, DemoConfig(out=tmp, progress=False))
        torch_default = torch.get_num_threads()
        routes = {
            f"--threads {DEFAULT_THREADS} (default)": DEFAULT_THREADS,
            f"torch's default ({torch_default} threads)": None,
        }
        best: dict[str, tuple[float, float, int]] = {}
        sweep(run, DEFAULT_THREADS)  # warm-up: imports, first allocations
        for _ in range(args.repeats):
            for name, threads in routes.items():
                found = sweep(run, threads)
                best[name] = min(best.get(name, found), found)
    per = {name: (cpu / n, wall / n) for name, (cpu, wall, n) in best.items()}
    ours, count = per[next(iter(routes))][0], best[next(iter(routes))][2]
    lines = [
        "# Scan of the demo's checkpoints",
        "",
        f"Every scan metric (ICL score aside) at each of the demo run's {count} checkpoints"
        f", best of {args.repeats} interleaved rounds (torch {torch.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at "
        "the end).",
        "",
        "| route | CPU s / checkpoint | wall s / checkpoint |",
        "|---|---:|---:|",
        *[f"| {name} | {cpu:.2f} | {wall:.2f} |" for name, (cpu, wall) in per.items()],
        "",
        f"Target: at most {TARGET_S} s of CPU per checkpoint with the default threads: "
        f"{ours:.2f} s, {'met' if ours <= TARGET_S else 'NOT met'}. Command: "
        "`.venv/bin/python lab/benchmarks/bench_scan_demo.py --write`.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
