"""Trajectory over a run's checkpoints: cold (every checkpoint scanned) vs warm (all cached)
vs one new checkpoint, measured side by side on the same tiny run.

``ihprobe.trajectory`` keys each checkpoint's scan by its weights hash and the scan settings,
so re-running after training wrote one more checkpoint scans only that one. The warm cost that
remains is hashing each checkpoint's weights and reading the cached rows.

It prints a markdown table and writes it to ``lab/benchmarks/RESULTS_trajectory.md``.
Run: ``.venv/bin/python lab/benchmarks/bench_trajectory.py``.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
import warnings
from pathlib import Path

import torch

CHECKPOINTS = 8
SCAN = {"n": 32, "batch": 50}
METRICS = ["prefix_matching", "previous_token", "ar_accuracy", "induction_loss"]


def make_run(root: Path, count: int) -> Path:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    for i in range(count):
        torch.manual_seed(i)
        cfg = GPTNeoXConfig(
            vocab_size=512,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=256,
            max_position_embeddings=128,
        )
        directory = root / "checkpoints" / f"step-{i * 100:06d}"
        GPTNeoXForCausalLM(cfg).save_pretrained(directory)  # no tokenizer: a stand-in loads
        meta = {"step": i * 100, "tokens": i * 100 * 2048, "run": "bench"}
        (directory / "ihprobe.json").write_text(json.dumps(meta))
    return root


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    import ihprobe

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "run", CHECKPOINTS)
        cache = Path(tmp) / "cache"

        def go():
            return ihprobe.trajectory(run, METRICS, cache=cache, **SCAN)

        cold = timed(go)
        warm = timed(go)
        make_run(Path(tmp) / "more", CHECKPOINTS + 1)  # one more checkpoint appears
        (Path(tmp) / "more" / "checkpoints" / f"step-{CHECKPOINTS * 100:06d}").rename(
            run / "checkpoints" / f"step-{CHECKPOINTS * 100:06d}"
        )
        one_new = timed(go)
    rows = [
        ("cold: scan all", cold, 1.0),
        ("warm: all cached", warm, warm / cold),
        ("one new checkpoint", one_new, one_new / cold),
    ]
    table = "\n".join(
        [
            f"Trajectory of {CHECKPOINTS} checkpoints (2L x 4H, d64, V512), metrics {METRICS}, "
            f"n={SCAN['n']}, batch={SCAN['batch']}; {platform.processor() or platform.machine()}, "
            "1 torch thread.",
            "",
            "| case | seconds | / cold |",
            "| --- | ---: | ---: |",
            *(f"| {name} | {sec:.2f} | {ratio:.2f} |" for name, sec, ratio in rows),
        ]
    )
    print(table)
    out = Path(__file__).with_name("RESULTS_trajectory.md")
    out.write_text(
        f"# Trajectory cache\n\nCommand: `.venv/bin/python lab/benchmarks/bench_trajectory.py`\n\n"
        f"{table}\n"
    )


if __name__ == "__main__":
    main()
