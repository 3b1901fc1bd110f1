"""Pythia-sized models on CPU: load, swap, scan, ablate and head effects vs bare forward passes.

Randomly initialised GPT-NeoX models with the configurations of Pythia-70m, 160m and 410m are
written once with ``save_pretrained`` (nothing is downloaded) under ``$IHPROBE_CACHE/bench`` or
``/tmp/ihprobe-bench``. Every measurement runs in its own subprocess, so that its peak memory
(``ru_maxrss``) is its own, and each operation is timed side by side with bare forward passes
(``model(tokens)``, the same rows, the same chunk) in the same process:

- load: ``ihprobe.load`` vs reading the checkpoint's safetensors (``safetensors.load_file``);
- swap: ``load_weights`` of a second checkpoint into the loaded skeleton vs reading its
  safetensors;
- scan: attention metrics, and all scan metrics, vs bare forwards over the rows scan runs;
- ablate: top set + R random draws vs (groups x one bare forward) + one reference pass;
- head_effects: when ``ihprobe.ablation`` provides it.

Run: ``python benchmarks/bench_scale.py [--sizes 70m,160m] [--rows 20] [--device cpu]
[--dtype float32] [--out benchmarks/RESULTS_scale.md]``.
"""

from __future__ import annotations

import json
import os
import resource
import time
import warnings
from pathlib import Path

import torch

PYTHIA = {  # GPTNeoXConfig values of EleutherAI/pythia-*
    "70m": {"num_hidden_layers": 6, "hidden_size": 512, "num_attention_heads": 8},
    "160m": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12},
    "410m": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16},
}
SHARED = {"vocab_size": 50304, "rotary_pct": 0.25, "max_position_embeddings": 2048,
          "use_parallel_residual": True, "rotary_emb_base": 10000, "bos_token_id": 0,
          "eos_token_id": 0, "tie_word_embeddings": False}  # fmt: skip
TASKS = ("load", "swap", "scan_attention", "scan_all", "ablate", "head_effects")
ATTENTION = ["prefix_matching", "previous_token", "duplicate_token", "forward_induction",
             "anti_induction"]  # fmt: skip
RANDOM = 5  # random draws in the ablate measurement (the report used 5)


def bench_dir() -> Path:
    root = os.environ.get("IHPROBE_CACHE")
    return Path(root) / "bench" if root else Path("/tmp/ihprobe-bench")


def checkpoint(size: str, seed: int = 0) -> Path:
    """The randomly initialised ``size`` model of ``seed``, written once."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    directory = bench_dir() / f"pythia-{size}-random-{seed}"
    if not (directory / "config.json").is_file():
        torch.manual_seed(seed)
        d = PYTHIA[size]["hidden_size"]
        cfg = GPTNeoXConfig(**PYTHIA[size], **SHARED, intermediate_size=4 * d)
        GPTNeoXForCausalLM(cfg).save_pretrained(directory)
    return directory


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bare(model, tokens: torch.Tensor, chunk: int) -> None:
    """Plain forward passes over ``tokens``, ``chunk`` rows at a time (full logits)."""
    with torch.inference_mode():
        for part in tokens.split(chunk):
            model(part)


def load_model(size: str, device: str, dtype: str):
    import ihprobe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ihprobe.load(checkpoint(size), device=device, dtype=dtype)


def read_safetensors(path: Path) -> None:
    from safetensors.torch import load_file

    for file in sorted(path.glob("*.safetensors")):
        load_file(str(file))


def scan_rows(model, batch: int, n: int) -> list[torch.Tensor]:
    """The rows ``scan`` runs: repeated tokens, then forward and backward snippets."""
    from ihprobe import inputs

    rows = [inputs.repeated_tokens(model, n=n, batch=batch, seed=0)]
    for backward in (False, True):
        rows.append(inputs.snippets(model, backward=backward, length=20, batch=batch, seed=0))
    return rows


def measure_load(size, device, dtype, rows, n, repeats) -> dict:
    path = checkpoint(size)
    read_safetensors(path)  # warm the page cache for both sides
    op = min(timed(lambda: load_model(size, device, dtype)) for _ in range(repeats))
    ref = min(timed(lambda: read_safetensors(path)) for _ in range(repeats))
    return {"op_s": op, "ref_s": ref, "ref": "read safetensors"}


def measure_swap(size, device, dtype, rows, n, repeats) -> dict:
    from ihprobe.models import load_weights

    model = load_model(size, device, dtype)
    other = checkpoint(size, seed=1)
    read_safetensors(other)
    op = min(timed(lambda: load_weights(model, other)) for _ in range(repeats))
    ref = min(timed(lambda: read_safetensors(other)) for _ in range(repeats))
    return {"op_s": op, "ref_s": ref, "ref": "read safetensors"}


def measure_scan(metrics):
    def measure(size, device, dtype, rows, n, repeats) -> dict:
        import ihprobe
        from ihprobe.probes.engine import DEFAULT_CHUNK

        model = load_model(size, device, dtype)
        runs = scan_rows(model, rows, n)
        if metrics is not None:  # attention metrics only: the snippet rows and repeated rows
            pass
        ref, op = [], []
        for _ in range(repeats):  # interleaved, so that load on the machine hits both alike
            ref.append(timed(lambda: [bare(model, r, DEFAULT_CHUNK) for r in runs]))
            op.append(timed(lambda: ihprobe.scan(model, metrics, n=n, batch=rows)))
        return {"op_s": min(op), "ref_s": min(ref), "ref": "bare forwards, same rows"}

    return measure


def measure_ablate(size, device, dtype, rows, n, repeats) -> dict:
    import ihprobe
    from ihprobe import inputs
    from ihprobe.probes.engine import DEFAULT_CHUNK

    model = load_model(size, device, dtype)
    tokens = inputs.repeated_tokens(model, n=n, batch=rows, seed=1)
    groups = 2 + RANDOM  # clean, top, random draws
    metrics = ["ar_accuracy", "induction_loss"]
    ref, op = [], []
    for _ in range(repeats):
        one = timed(lambda: bare(model, tokens, DEFAULT_CHUNK))
        ref.append(one * (groups + 1))  # the groups + one reference (mean z) pass
        op.append(timed(lambda: ihprobe.ablate(model, random=RANDOM, metrics=metrics, n=n,
                                               batch=rows)))  # fmt: skip
    return {"op_s": min(op), "ref_s": min(ref), "ref": f"({groups} groups + 1) x bare forward"}


def measure_head_effects(size, device, dtype, rows, n, repeats) -> dict:
    from ihprobe import ablation

    if not hasattr(ablation, "head_effects"):
        return {"skipped": "ihprobe.ablation has no head_effects on this branch"}
    from ihprobe import inputs
    from ihprobe.probes.engine import DEFAULT_CHUNK

    model = load_model(size, device, dtype)
    tokens = inputs.repeated_tokens(model, n=n, batch=rows, seed=1)
    heads = model.cfg.n_layers * model.cfg.n_heads
    ref, op = [], []
    for _ in range(repeats):
        one = timed(lambda: bare(model, tokens, DEFAULT_CHUNK))
        ref.append(one * (heads + 2))
        op.append(timed(lambda: ablation.head_effects(model, metrics=["induction_loss"], n=n,
                                                       batch=rows)))  # fmt: skip
    return {"op_s": min(op), "ref_s": min(ref), "ref": "(heads + 2) x bare forward"}


MEASURES = {
    "load": measure_load,
    "swap": measure_swap,
    "scan_attention": measure_scan(ATTENTION),
    "scan_all": measure_scan(None),
    "ablate": measure_ablate,
    "head_effects": measure_head_effects,
}


def worker(task: str, size: str, device: str, dtype: str, rows: int, n: int, repeats: int):
    """One measurement in this process; prints its JSON line with the peak RSS."""
    torch.set_grad_enabled(False)
    out = MEASURES[task](size, device, dtype, rows, n, repeats)
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if device.startswith("cuda") and torch.cuda.is_available():
        out["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(out))
