"""Threads: tokens per CPU-second of ``ihprobe.train`` on the demo model at 1, 2, ... threads.

``ihprobe train --threads`` (and every command that runs torch) defaults to the package's
thread count (the ``threads`` default of its public calls); this script measures what that
default should be. Each thread count trains the demo's model (``DemoConfig``: GPT-NeoX
2 x 10 heads, d_model 80, B=32, C=64, the demo's repeats data) for ``--steps`` updates,
interleaved over ``--repeats`` rounds so that a busy machine slows every setting alike, and
counts the process's CPU time (all its threads) and the wall time; the best round of each
setting counts. It prints the table and
whether the default is within 10% of the best tokens per CPU-second.

    .venv/bin/python lab/benchmarks/bench_threads.py [--steps 100] [--repeats 2] [--write]

``--write`` stores the table in lab/benchmarks/RESULTS_threads.md.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

import ihprobe
from ihprobe import DemoConfig, TrainConfig, train

# the package's default thread count, as its public calls take it
DEFAULT_THREADS = inspect.signature(ihprobe.trajectory).parameters["threads"].default

RESULTS = Path(__file__).with_name("RESULTS_threads.md")
TARGET = 0.9  # the default's tokens per CPU-second, at least this fraction of the best


def demo_model(out: str, steps: int) -> TrainConfig:
    """The demo's model and data (``ihprobe.jobs.demo.DemoConfig``), two checkpoints only."""
    demo = DemoConfig(out=out, steps=steps, checkpoints="linear", n_checkpoints=1, progress=False)
    return replace(demo.train_config(), device="cpu")


def measure(threads: int, steps: int, tmp: str) -> tuple[float, float]:
    """(tokens per CPU-second, tokens per wall-second) of one training run."""
    config = demo_model(tempfile.mkdtemp(dir=tmp), steps)
    torch.set_num_threads(threads)  # every measurement sets its own
    wall, cpu = time.perf_counter(), time.process_time()
    train(config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    tokens = steps * config.batch_size * config.context
    return tokens / cpu, tokens / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    counts = list(range(1, (os.cpu_count() or 1) + 1))
    best: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        measure(1, 5, tmp)  # warm-up: imports, first allocations
        for _ in range(args.repeats):
            for n in counts:
                per_cpu, per_wall = measure(n, args.steps, tmp)
                old = best.get(n, (0.0, 0.0))
                best[n] = (max(old[0], per_cpu), max(old[1], per_wall))
    top = max(v[0] for v in best.values())
    lines = [
        "# Threads benchmark",
        "",
        f"`ihprobe.train` of the demo model (2 x 10 heads, d_model 80), {args.steps} updates of "
        "B=32 x C=64, best of "
        f"{args.repeats} interleaved rounds (torch {torch.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end).",
        "",
        "| threads | tokens / CPU-s | tokens / wall-s | CPU-s efficiency vs best |",
        "|---:|---:|---:|---:|",
        *[f"| {n} | {c:,.0f} | {w:,.0f} | {c / top:.2f} |" for n, (c, w) in best.items()],
        "",
    ]
    ratio = best[min(DEFAULT_THREADS, max(counts))][0] / top
    verdict = "met" if ratio >= TARGET else "NOT met"
    lines.append(
        f"Default `--threads {DEFAULT_THREADS}`: {ratio:.2f} of the best tokens per CPU-second "
        f"(target >= {TARGET}: {verdict}). Command: "
        "`.venv/bin/python lab/benchmarks/bench_threads.py --write`."
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
