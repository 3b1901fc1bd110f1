"""Attention scores without patterns: peak memory and time of a pair scan vs the pattern scan.

Randomly initialised GPT-NeoX models with the configurations of Pythia-160m and 410m
(``bench_scale.PYTHIA``; the context set to the probe's length), scanned for prefix matching on
repeated random tokens of 2,048 and 8,192 positions (``n`` = half of it) two ways:
``attention="patterns"`` (the bridge rebuilds each layer's full ``[rows, heads, n, n]``
pattern, as scans did before) and ``attention="pairs"`` (SDPA attention; the pairs
from queries and keys, log-sum-exp in row chunks: ``ihprobe.io.attention``). Both scans score
the same rows; their ``prefix_matching`` must agree to 1e-4 or the run stops.

Each scan runs in its own subprocess, the two paths (and the floor: a bare forward of the same
rows in a pair pass, unembedding nothing, what any pair scan costs at least) interleaved
``--repeats`` times in one run; a process scans twice and measures the second scan (the first
warms lazy imports, kernels and the allocator's heap). Peak memory is what the scan adds above
the memory held before it: on a CPU the peak of the process's RSS sampled every millisecond by
a thread (``psutil``), in a worker of its own whose allocator unmaps what it frees
(``EXACT_RSS``), on an accelerator ``torch.cuda.max_memory_allocated`` after a reset. Seconds
are CPU seconds of the process on a CPU (others' load does not count), wall seconds after a
synchronize on an accelerator.

Run: ``python lab/benchmarks/bench_fastpath.py [--device cpu|cuda] [--sizes 160m,410m]
[--contexts 2048,8192] [--rows 1] [--layers 0] [--repeats 2] [--out ...]``. ``--layers K``
keeps the first K layers (0: all), ``--long-layers`` the layers at contexts above 2,048 (a
pattern's memory is per layer, so the peak does not depend on the layer count; the time ratio
is per layer too). A pattern scan whose patterns would take more than half the available memory
is skipped and said so (on a CPU: 2.5 patterns over 60% of the free memory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import psutil
import torch
from bench_scale import PYTHIA, SHARED  # lab/benchmarks/: the script's folder
from sections import where, write_section

RESULTS = Path(__file__).with_name("RESULTS_fastpath.md")
PATHS = ("patterns", "pairs", "floor")  # floor: a bare SDPA forward, unembedding nothing
# glibc: a fixed mmap threshold (which also stops it rising) maps every allocation of 128 KiB
# or more on its own and unmaps it when freed, so a CPU worker's RSS follows its live tensors
# instead of a heap the warm-up scan left resident (which hid a pair scan's reused activations)
EXACT_RSS = {"MALLOC_MMAP_THRESHOLD_": "131072"}
TARGETS = {"memory": 10.0, "time": 1.0}  # pairs: >= 10x less peak memory at 2,048; no slower


class PeakRSS:
    """The highest RSS of this process while the block runs, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.001):
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def _sample(self):
        me = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, me.memory_info().rss)
            time.sleep(self.every)

    def __enter__(self):
        self.before = psutil.Process().memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, psutil.Process().memory_info().rss)


def model_of(size: str, context: int, layers: int, device: str):
    """The bridge around a random ``size`` model with ``context`` positions and ``layers``."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    import ihprobe

    shape = {**PYTHIA[size]}
    shape["num_hidden_layers"] = layers or shape["num_hidden_layers"]
    d = shape["hidden_size"]
    cfg = GPTNeoXConfig(
        **{**SHARED, **shape, "max_position_embeddings": context}, intermediate_size=4 * d
    )
    torch.manual_seed(0)
    with warnings.catch_warnings(), torch.device(device):
        warnings.simplefilter("ignore")
        return ihprobe.load(GPTNeoXForCausalLM(cfg).eval())


def worker(size: str, context: int, layers: int, rows: int, path: str, device: str) -> dict:
    """One scan in this process: its seconds, the memory it added, and its scores."""
    import ihprobe

    torch.set_grad_enabled(False)
    model = model_of(size, context, layers, device)

    def run():
        if path == "floor":
            return floor(model, context, rows)
        return ihprobe.scan(model, ["prefix_matching"], n=context // 2, batch=rows, attention=path)

    run()  # warm: lazy imports, kernels, the allocator's heap; the second run is measured
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        scores = run()
        torch.cuda.synchronize()
        seconds, added = time.perf_counter() - start, torch.cuda.max_memory_allocated() - base
    else:
        with PeakRSS() as peak:
            start = time.process_time()
            scores = run()
            seconds = time.process_time() - start
        added = peak.peak - peak.before
    if path == "floor":
        return {"seconds": seconds, "added_gb": added / 2**30}
    scores_now = scores.head["prefix_matching"].flatten().tolist()
    used = scores.settings["attention"]
    return {"seconds": seconds, "added_gb": added / 2**30, "attention": used, "scores": scores_now}


def floor(model, context: int, rows: int) -> None:
    """What any pair scan costs at least: a forward of the same rows in a pair pass (SDPA
    attention, MLPs over chunks of positions), no KV cache and no hooks, unembedding no
    position."""
    from ihprobe.io.attention import pair_pass

    tokens = torch.randint(0, model.cfg.d_vocab, (rows, context), device=model.cfg.device)
    nothing = [("unembed.hook_in", lambda x, hook: x[:, :0])]
    with pair_pass(model, {}):
        model.run_with_hooks(tokens, fwd_hooks=nothing, use_cache=False)  # a bridge: no KV cache


def pattern_gb(size: str, context: int, rows: int) -> float:
    """One layer's float32 pattern, ``[rows, heads, context, context]``, in GB."""
    return rows * PYTHIA[size]["num_attention_heads"] * context**2 * 4 / 2**30


def run_worker(size, context, layers, path, opts, exact_rss: bool = False) -> dict:
    argv = [sys.executable, __file__, "--worker", path, "--sizes", size, "--device", opts.device]
    argv += ["--contexts", str(context), "--layers", str(layers), "--rows", str(opts.rows)]
    # ihprobe's memory estimate is keyed on the model's context with full logits (a rough
    # refusal); this script guards the pattern scans itself (measure), so it lifts the estimate
    env = {
        **os.environ,
        **(EXACT_RSS if exact_rss else {}),
        "IHPROBE_NO_SIZE_LIMITS": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {"skipped": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(size: str, context: int, layers: int, opts) -> dict:
    """Both paths and the floor, interleaved ``opts.repeats`` times: the least seconds and the
    least added memory of each (the RSS of a fresh heap only errs upward). On a CPU the memory
    comes from a second worker of each, run with :data:`EXACT_RSS` (its many mappings would
    slow the seconds), the seconds from the first."""
    free = psutil.virtual_memory().available / 2**30
    need = 2.5 * pattern_gb(size, context, opts.rows)  # measured: 2.1-2.2 patterns at a time
    if opts.device == "cpu" and need > 0.6 * free:
        return {"skipped": f"patterns need ~{need:.1f} GB, over 60% of the {free:.1f} GB free"}
    found: dict[str, list[dict]] = {p: [] for p in PATHS}
    for _ in range(opts.repeats):
        for path in PATHS:
            found[path].append(run_worker(size, context, layers, path, opts))
            if "skipped" in found[path][-1]:
                return found[path][-1]
            if opts.device == "cpu":  # memory from a worker whose RSS follows its tensors
                sized = run_worker(size, context, layers, path, opts, exact_rss=True)
                if "skipped" in sized:
                    return sized
                found[path][-1]["added_gb"] = sized["added_gb"]
    a, b = (torch.tensor(found[p][0]["scores"]) for p in PATHS[:2])
    if not torch.allclose(a, b, atol=1e-4) or found["pairs"][0]["attention"] != "pairs":
        raise SystemExit(f"{size} at {context}: the paths disagree ({(a - b).abs().max():.2e})")
    best = {p: min(r["seconds"] for r in found[p]) for p in PATHS}
    added = {p: min(r["added_gb"] for r in found[p]) for p in PATHS}
    layers = layers or PYTHIA[size]["num_hidden_layers"]
    difference = float((a - b).abs().max())
    return {"seconds": best, "added_gb": added, "layers": layers, "difference": difference}


def table(results: dict, opts) -> str:
    lines = [
        "| model | context | layers | rows | pattern s | pairs s | time ratio | pattern "
        "peak GB | pairs peak GB | memory ratio | bare forward GB | max difference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (size, context), r in results.items():
        if "skipped" in r:
            lines.append(
                f"| {size} | {context} | | {opts.rows} | - | - | - | - | - | - | - | "
                f"{r['skipped']} |"
            )
            continue
        s, m = r["seconds"], r["added_gb"]
        lines.append(
            f"| {size} | {context} | {r['layers']} | {opts.rows} | {s['patterns']:.2f} | "
            f"{s['pairs']:.2f} | {s['patterns'] / s['pairs']:.2f}x | "
            f"{m['patterns']:.3f} | {m['pairs']:.3f} | "
            f"{m['patterns'] / max(m['pairs'], 1e-9):.1f}x | {m['floor']:.3f} | "
            f"{r['difference']:.1e} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="160m,410m")
    parser.add_argument("--contexts", default="2048,8192")
    parser.add_argument("--rows", type=int, default=1, help="rows of repeated tokens")
    parser.add_argument("--layers", type=int, default=0, help="first K layers (0: all)")
    parser.add_argument("--long-layers", type=int, default=2, help="layers above 2,048 tokens")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--section", default=None, help="section of --out (default: device)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.worker:
        size, context = opts.sizes, int(opts.contexts)
        print(json.dumps(worker(size, context, opts.layers, opts.rows, opts.worker, opts.device)))
        return
    results = {}
    for size in opts.sizes.split(","):
        for context in map(int, opts.contexts.split(",")):
            layers = opts.long_layers if context > 2048 else opts.layers
            results[(size, context)] = measure(size, context, layers, opts)
            print(size, context, results[(size, context)], flush=True)
    header = (
        f"{where(opts.device)}; torch {torch.__version__}; float32; prefix matching on repeated "
        f"random tokens; least of {opts.repeats} runs (seconds and memory); "
        f"ratios are pattern / pairs (higher is better for pairs)."
    )
    text = f"{header}\n\n{table(results, opts)}"
    print(text)
    write_section(Path(opts.out), opts.section or opts.device.split(":")[0], text)


if __name__ == "__main__":
    main()
