"""The device job's ``seeds-K`` steps: the aggregate tokens/s of K training runs sharing one
device (``ihprobe sweep --per-device K``), in the shape of the natural-text recipe ``d128-B16``
(iid tokens of its 512-id vocabulary: the speed depends on the shape, not the text).

>>> RECIPE[RECIPE.index("--d-model") + 1], SEED_STEPS
('128', 2000)
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

RECIPE = tuple(
    "--arch gpt-neox --layers 2 --heads 4 --d-model 128 --context 256 --batch-size 16 --lr 3e-3 "
    "--producer iid --vocab-size 512 --schedule constant --checkpoints linear --n-checkpoints 1 "
    "--state-every 0 --log-every 50".split()
)
SEED_STEPS = 2000  # updates of one run alone; K runs take SEED_STEPS / K each (at least 300)


def logged(run: Path) -> list[dict]:
    """A run's ``metrics.jsonl`` lines (none for a run that failed before it logged)."""
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def speed_seeds(k: int, device: str, tiny: bool) -> list[dict]:
    """Aggregate tokens/s of ``k`` runs of the recipe side by side on the device: the sum of
    each run's median speed over its log lines (the loop alone), and all their tokens over the
    wall time (process starts included)."""
    from ihprobe.jobs import sweep

    tiny_shape = ("--d-model", "32", "--context", "64", "--batch-size", "4") if tiny else ()
    steps = 60 if tiny else max(SEED_STEPS // k, 300)
    runs = sweep.plan([f"seed={','.join(str(s) for s in range(k))}"], Path(tempfile.mkdtemp()))
    begin = time.perf_counter()
    status = sweep.train_all(runs, (*RECIPE, *tiny_shape, "--steps", str(steps)), per_device=k)
    wall = time.perf_counter() - begin
    records = [logged(Path(r.out)) for r in runs]
    inner = sum(float(np.median([x["tokens_per_s"] for x in r])) for r in records if r)
    tokens = sum(r[-1]["tokens"] for r in records if r)
    finished = sum(code == 0 for code in status.values())
    return [
        {
            "K": k,
            "updates per run": steps,
            "runs finished": finished,
            "tokens/s (sum in loop)": round(inner),
            "tokens/s (wall)": round(tokens / wall),
            "wall s": round(wall, 1),
        }
    ]
