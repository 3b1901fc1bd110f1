"""Validation of the live emergence forecast on the demo configuration (README "Validation").

Trains the demo configuration (2-layer GPT-NeoX d64, 4 heads, C=64, B=32, ``repeats``
producer, AdamW 3e-3 constant, 2000 updates, 20 linear checkpoints) for three seeds with live
probes, plus two earlier runs at B=16 and B=64 (seed 0) that play the user's ``--law-from``
runs. For each seed it replays the run's ``probes.jsonl`` through the forecaster the trainer
uses live (:func:`ihprobe.forecast.forecast_records`: each forecast sees only the probes up to
its step) and checks whether the forecast made after 30% of the run contains the measured
emergence point (the change point of the run's max-PS trajectory, ``run_emergence``).

Every run is resumable: rerunning the script reuses finished runs. Writes
``benchmarks/RESULTS_forecast.md`` and ``benchmarks/RESULTS_forecast.csv``. From the repository
root: ``.venv/bin/python benchmarks/validate_forecast.py [--seeds 0 1 2] [--out runs/...]``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = {  # ihprobe.demo.DemoConfig's training settings
    "producer": "repeats",
    "producer_options": {"period": [8, 32], "start": [0, 8], "vocab_size": 300},
    "layers": 2,
    "heads": 4,
    "d_model": 64,
    "context": 64,
    "lr": 3e-3,
    "schedule": "constant",
    "checkpoints": "linear",
    "n_checkpoints": 20,
    "live_probes": True,
}
TARGET = {"batch_size": 32, "steps": 2000}
# The user's earlier runs: other batch sizes, long enough to pass their emergence.
LAW_FROM = {"B16": {"batch_size": 16, "steps": 3000}, "B64": {"batch_size": 64, "steps": 1500}}
AT = 0.3  # the forecast checked is the one made after this fraction of the run


def train_run(out: Path, seed: int, shape: dict) -> tuple[Path, float]:
    """Train (or finish, or reuse) one run; seconds spent."""
    from ihprobe.trainer import TrainConfig, train

    begin = time.perf_counter()
    config = TrainConfig(out=str(out), seed=seed, resume=True, progress=False, **DEMO, **shape)
    return train(config), time.perf_counter() - begin


def train_all(out: Path, seeds: list[int]) -> dict[str, tuple[Path, float]]:
    runs = {name: train_run(out / name, 0, shape) for name, shape in LAW_FROM.items()}
    for seed in seeds:
        runs[f"seed{seed}"] = train_run(out / f"B32-seed{seed}", seed, TARGET)
        print(f"trained seed {seed} in {runs[f'seed{seed}'][1]:.0f} s", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-forecast"))
    parser.add_argument("--train-only", action="store_true")
    args = parser.parse_args()
    runs = train_all(Path(args.out), args.seeds)
    if args.train_only:
        return
    command = "python benchmarks/validate_forecast.py " + shlex.join(sys.argv[1:])
    print(command, runs)


if __name__ == "__main__":
    main()
