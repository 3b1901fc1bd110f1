"""Pythia-sized models: load, swap, scan, ablate and head effects vs bare forward passes.

Randomly initialised GPT-NeoX models with the configurations of Pythia-70m, 160m, 410m and 1.4b
(and a ``tiny`` one for the CPU mode of the device job). The steps that time ihprobe against a
bare forward (scan, ablate, head effects, memory) build their model directly on the device, in
its dtype, and bridge it (``ihprobe.load``): nothing is written or read. Only
load and swap, which time reading checkpoints, write theirs once with ``save_pretrained``
(built on the GPU when there is one) under ``$IHPROBE_CACHE/bench`` or ``/tmp/ihprobe-bench``;
nothing is downloaded. Every measurement runs in its own subprocess, so that its peak memory
(``ru_maxrss``) is its own, and each operation is timed side by side with bare forward passes
(``model(tokens)``, the same rows, the same chunk) in the same process:

- load: ``ihprobe.load`` vs reading the checkpoint's safetensors (``safetensors.load_file``);
- swap: ``load_weights`` of a second checkpoint into the loaded skeleton vs reading its
  safetensors;
- scan: attention metrics, and all scan metrics, vs bare forwards over the rows scan runs;
- ablate: top set + R random draws vs (groups x one bare forward) + one reference pass;
- head_effects: when ``ihprobe.causal.per_head`` provides it.

Run: ``python lab/benchmarks/bench_scale.py [--sizes 70m,160m] [--rows 20] [--device cpu]
[--dtype float32] [--out lab/benchmarks/RESULTS_scale.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
from sections import where, write_section  # lab/benchmarks/ is the script's folder

PYTHIA = {  # GPTNeoXConfig values of EleutherAI/pythia-*
    "70m": {"num_hidden_layers": 6, "hidden_size": 512, "num_attention_heads": 8},
    "160m": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12},
    "410m": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16},
    "1.4b": {"num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16},
    "tiny": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "vocab_size": 512,
    },  # the device job's CPU mode
}
SHARED = {
    "vocab_size": 50304,
    "rotary_pct": 0.25,
    "max_position_embeddings": 2048,
    "use_parallel_residual": True,
    "rotary_emb_base": 10000,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "tie_word_embeddings": False,
}
TASKS = ("load", "swap", "scan_attention", "scan_all", "ablate", "head_effects")
ATTENTION = [
    "prefix_matching",
    "previous_token",
    "duplicate_token",
    "forward_induction_fixed",
    "anti_induction",
]
RANDOM = 5  # random draws in the ablate measurement (the issue's report used 5)
EFFECT_ROWS = 4  # rows of the head_effects measurement


def scan_chunk() -> int:
    """``ihprobe.scan``'s default rows per forward (``chunk``): the bare forwards run alike."""
    import inspect

    import ihprobe

    return inspect.signature(ihprobe.scan).parameters["chunk"].default


def bench_dir() -> Path:
    root = os.environ.get("IHPROBE_CACHE")
    return Path(root) / "bench" if root else Path("/tmp/ihprobe-bench")


def random_model(size: str, seed: int = 0, device: str = "cpu", dtype: str = "float32"):
    """The randomly initialised HF ``size`` model of ``seed``, built on ``device`` in ``dtype``
    (initialised there: a 1.4b model takes seconds on a GPU, minutes on a CPU)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    d = PYTHIA[size]["hidden_size"]
    cfg = GPTNeoXConfig(**{**SHARED, **PYTHIA[size]}, intermediate_size=4 * d)
    with torch.device(device):
        return GPTNeoXForCausalLM(cfg).to(getattr(torch, dtype)).eval()


def checkpoint(size: str, seed: int = 0) -> Path:
    """The randomly initialised ``size`` model of ``seed``, written once (for load and swap)."""
    directory = bench_dir() / f"pythia-{size}-random-{seed}"
    if not (directory / "config.json").is_file():
        where = "cuda" if torch.cuda.is_available() else "cpu"
        random_model(size, seed, where).save_pretrained(directory)
    return directory


def timed(fn) -> float:
    """Seconds of ``fn``: CPU seconds of this process on a CPU (other processes on a loaded
    machine do not count), wall seconds after a synchronize on an accelerator."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start
    start = time.process_time()
    fn()
    return time.process_time() - start


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


def built_model(size: str, device: str, dtype: str):
    """The bridge around a random ``size`` model built on ``device`` (no file written)."""
    import ihprobe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ihprobe.load(random_model(size, 0, device, dtype))


def read_safetensors(path: Path) -> None:
    """Every tensor of the checkpoint in memory: ``load_file`` maps the file lazily, so each
    tensor is copied once to read its pages."""
    from safetensors.torch import load_file

    for file in sorted(path.glob("*.safetensors")):
        for tensor in load_file(str(file)).values():
            tensor.clone()


def scan_rows(model, batch: int, n: int) -> list[torch.Tensor]:
    """The rows ``scan`` runs: repeated tokens, then forward and backward snippets."""
    import ihprobe
    from ihprobe.probes.inputs import snippets

    rows = [ihprobe.repeated_tokens(model, n=n, batch=batch, seed=0)]
    for backward in (False, True):
        rows.append(snippets(model, backward=backward, length=20, batch=batch, seed=0))
    return rows


def measure_load(size, device, dtype, rows, n, repeats) -> dict:
    path = checkpoint(size)
    read_safetensors(path)  # warm the page cache for both sides
    op = min(timed(lambda: load_model(size, device, dtype)) for _ in range(repeats))
    ref = min(timed(lambda: read_safetensors(path)) for _ in range(repeats))
    return {"op_s": op, "ref_s": ref, "ref": "read safetensors"}


def measure_swap(size, device, dtype, rows, n, repeats) -> dict:
    from ihprobe.io.swap import load_weights

    model = load_model(size, device, dtype)
    other = checkpoint(size, seed=1)
    read_safetensors(other)
    op = min(timed(lambda: load_weights(model, other)) for _ in range(repeats))
    ref = min(timed(lambda: read_safetensors(other)) for _ in range(repeats))
    return {"op_s": op, "ref_s": ref, "ref": "read safetensors"}


def measure_scan(metrics):
    def measure(size, device, dtype, rows, n, repeats) -> dict:
        import ihprobe

        model = built_model(size, device, dtype)
        runs = scan_rows(model, rows, n)
        ref, op = [], []
        for _ in range(repeats):  # interleaved, so that load on the machine hits both alike
            ref.append(timed(lambda: [bare(model, r, scan_chunk()) for r in runs]))
            op.append(timed(lambda: ihprobe.scan(model, metrics, n=n, batch=rows)))
        return {"op_s": min(op), "ref_s": min(ref), "ref": "bare forwards, same rows"}

    return measure


def measure_ablate_before(size, device, dtype, rows, n, repeats) -> dict:
    """``ablate`` with the logits budget it had before issue 13 (16 MB: one row a pass at
    Pythia's vocabulary), for the profile in RESULTS_scale.md."""
    from ihprobe.probes.engine import MAX_LOGITS

    MAX_LOGITS["cpu"] = 2**22
    return measure_ablate(size, device, dtype, rows, n, repeats)


def measure_ablate_ranked(size, device, dtype, rows, n, repeats) -> dict:
    """``ablate`` given the head scores (``scores=``), so that the ranking scan is left out:
    what the floor (groups + one reference pass) counts."""
    return measure_ablate(size, device, dtype, rows, n, repeats, ranked=True)


def measure_ablate(size, device, dtype, rows, n, repeats, ranked: bool = False) -> dict:
    import ihprobe

    model = built_model(size, device, dtype)
    tokens = ihprobe.repeated_tokens(model, n=n, batch=rows, seed=1)
    groups = 2 + RANDOM  # clean, top, random draws
    metrics = ["ar_accuracy", "induction_loss"]
    given = {"scores": torch.rand(model.cfg.n_layers, model.cfg.n_heads)} if ranked else {}
    ref, op = [], []
    for _ in range(repeats):
        one = timed(lambda: bare(model, tokens, scan_chunk()))
        ref.append(one * (groups + 1))  # the groups + one reference (mean z) pass
        op.append(
            timed(
                lambda: ihprobe.ablate(
                    model, random=RANDOM, metrics=metrics, n=n, batch=rows, **given
                )
            )
        )
    return {"op_s": min(op), "ref_s": min(ref), "ref": f"({groups} groups + 1) x bare forward"}


def measure_head_effects(size, device, dtype, rows, n, repeats) -> dict:
    import ihprobe

    model = built_model(size, device, dtype)
    rows = min(rows, EFFECT_ROWS)  # L x H + 1 groups: few rows keep it within minutes on CPU
    tokens = ihprobe.repeated_tokens(model, n=n, batch=rows, seed=1)
    heads = model.cfg.n_layers * model.cfg.n_heads
    ref, op = [], []
    for _ in range(repeats):
        one = timed(lambda: bare(model, tokens, scan_chunk()))
        ref.append(one * (heads + 2))  # every head alone, the clean group, the reference
        op.append(
            timed(lambda: ihprobe.head_effects(model, metrics=["induction_loss"], n=n, batch=rows))
        )
    return {"op_s": min(op), "ref_s": min(ref), "ref": f"(L x H + 2) x bare forward, {rows} rows"}


def measure_memory(size, device, dtype, rows, n, repeats) -> dict:
    """Peak RSS of ``scan`` (all metrics) at its default chunk, alone in its process (no bare
    forwards with full logits beside it): after loading, and after the scan."""
    import ihprobe

    model = built_model(size, device, dtype)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    op = timed(lambda: ihprobe.scan(model, n=n, batch=scan_chunk()))
    return {"op_s": op, "ref_s": float("nan"), "ref": f"peak RSS after load {loaded:.2f} GB"}


MEASURES = {
    "load": measure_load,
    "swap": measure_swap,
    "scan_attention": measure_scan(ATTENTION),
    "scan_all": measure_scan(None),
    "ablate": measure_ablate,
    "head_effects": measure_head_effects,
    "ablate_before": measure_ablate_before,  # these two are not in TASKS: --tasks names them
    "ablate_ranked": measure_ablate_ranked,
    "memory": measure_memory,
}


def worker(task: str, size: str, device: str, dtype: str, rows: int, n: int, repeats: int):
    """One measurement in this process; prints its JSON line with the peak RSS."""
    torch.set_grad_enabled(False)
    out = MEASURES[task](size, device, dtype, rows, n, repeats)
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if device.startswith("cuda") and torch.cuda.is_available():
        out["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(out))


TARGETS = {
    "swap": 1.5,
    "scan_attention": 1.3,
    "scan_all": 1.3,
    "ablate": 1.15,
    "ablate_before": 1.15,
    "ablate_ranked": 1.15,
}
RESULTS = Path(__file__).with_name("RESULTS_scale.md")


def run_worker(task: str, size: str, opts) -> dict:
    """One measurement in a fresh process (its own peak memory); its JSON line."""
    passed = {  # the worker reads the same options, for one size
        "--sizes": size,
        "--rows": opts.rows,
        "--n": opts.n,
        "--repeats": opts.repeats,
        "--device": opts.device,
        "--dtype": opts.dtype,
    }
    flags = [str(word) for pair in passed.items() for word in pair]
    argv = [sys.executable, __file__, "--worker", task, *flags]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ})
    if done.returncode != 0:
        return {"skipped": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def weights_gb(size: str) -> float:
    """The size of the model's float32 weights (its parameters x 4 bytes, from the config)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    d = PYTHIA[size]["hidden_size"]
    cfg = GPTNeoXConfig(**{**SHARED, **PYTHIA[size]}, intermediate_size=4 * d)
    with torch.device("meta"):
        return GPTNeoXForCausalLM(cfg).num_parameters() * 4 / 2**30


def table(results: dict, opts) -> str:
    lines = [
        "| model | step | seconds | reference | ref seconds | ratio | target | peak RSS GB "
        "| weights GB |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (size, task), r in results.items():
        if "skipped" in r:
            lines.append(f"| {size} | {task} | - | {r['skipped']} | | | | | |")
            continue
        ratio = r["op_s"] / r["ref_s"]
        target = f"<= {TARGETS[task]}" if task in TARGETS else ""
        shown = "-" if ratio != ratio else f"{ratio:.2f}x"  # NaN: no time reference
        lines.append(
            f"| {size} | {task} | {r['op_s']:.2f} | {r['ref']} | {r['ref_s']:.2f} | "
            f"{shown} | {target} | {r['peak_rss_gb']:.2f} | "
            f"{weights_gb(size):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="70m,160m")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--rows", type=int, default=20, help="probe rows (batch)")
    parser.add_argument("--n", type=int, default=50, help="half-length of repeated tokens")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--section", help="write the table into this section of RESULTS_scale.md")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.worker:
        return worker(
            opts.worker, opts.sizes, opts.device, opts.dtype, opts.rows, opts.n, opts.repeats
        )
    results = {}
    for size in opts.sizes.split(","):
        if {"load", "swap"} & set(opts.tasks.split(",")):
            checkpoint(size), checkpoint(size, seed=1)
        for task in opts.tasks.split(","):
            results[size, task] = run_worker(task, size, opts)
            print(size, task, results[size, task], flush=True)
    text = (
        f"{where(opts.device)}; torch {torch.__version__}; dtype {opts.dtype}; {opts.rows} rows of "
        f"2 x {opts.n} tokens; best of {opts.repeats}; ablate with {RANDOM} random draws."
        f"\n\n{table(results, opts)}"
    )
    print(text)
    if opts.section:
        write_section(RESULTS, opts.section, text)


if __name__ == "__main__":
    main()
