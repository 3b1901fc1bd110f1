"""Probe battery speed and memory, side by side in one process on the same model and tokens.

Routes, all on the same ``[batch, 2n]`` repeated random tokens of one randomly initialised
GPT-NeoX (4 layers x 8 heads by default):

* ``forward``   -- one bare forward pass (``model(tokens)``): the floor, the model has to run.
* ``ihprobe``   -- ``ihprobe.scan`` of every metric of the repeated-token family plus the
  weight-only copying score, scores reduced inside the hooks, all rows in one pass
  (``chunk=None``).
* ``ihprobe, chunk C`` -- the same, ``C`` rows per forward pass (``scan``'s default, C=25).
* ``cache``     -- the straightforward TransformerLens way: ``run_with_cache`` of everything,
  then each metric from the cache.
* ``detect_head`` -- ``transformer_lens.head_detector.detect_head(model, prompts,
  "induction_head")`` over the same sequences: prefix matching only.
* ``detect_head x3`` -- its three head types (induction, previous token, duplicate token),
  the quantities it shares with ihprobe's pass; one call, so one set of passes, per type.
* ``scan (all)`` -- for reference, the full ``scan`` including the snippet pass (a second
  input family, so a second forward pass).

Time is the best of ``--repeats`` rounds (wall clock and this process's CPU time), routes
interleaved within each round so that load from other processes hits them alike. Peak memory
on CPU is the rise of the process's peak resident set (``VmHWM``, reset through
``/proc/self/clear_refs`` before each route) with glibc returning large blocks to the system at
once (``MALLOC_MMAP_THRESHOLD_``, set by re-executing this script); on CUDA it is
``torch.cuda.max_memory_allocated``. Results are printed and written to
``lab/benchmarks/RESULTS_probes.md``.

    python lab/benchmarks/bench_probes.py                 # 4 layers, 8 heads, batch 100, n 50
    python lab/benchmarks/bench_probes.py --device cuda --repeats 5
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"
RESULTS = Path(__file__).with_name("RESULTS_probes.md")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk", type=int, default=25, help="rows per pass of the chunked route")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--no-write", action="store_true", help="print only, do not write RESULTS")
    return p.parse_args()


# ----------------------------------------------------------------------------- memory


class Peak:
    """Peak extra memory of a block: CUDA allocator stats, or the CPU process's VmHWM."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")

    def __enter__(self):
        import torch

        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            self.base = _status("VmRSS")
        return self

    def __exit__(self, *exc):
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated() - self.base
        else:
            self.peak = _status("VmHWM") - self.base


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


# ----------------------------------------------------------------------------- routes


def build_model(args, directory: Path):
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    import ihprobe

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=args.vocab,
        hidden_size=args.d_model,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.d_model,
        max_position_embeddings=max(256, 2 * args.n + 1),
    )
    GPTNeoXForCausalLM(config).save_pretrained(directory)  # no tokenizer: ihprobe loads a stand-in
    return ihprobe.load(directory, device=args.device)


HEAD_KINDS = ("induction_head", "previous_token_head", "duplicate_token_head")
REPEATED = [
    "prefix_matching",
    "prefix_matching_sd",
    "previous_token",
    "duplicate_token",
    "copying",
    "logit_attribution",
    "ps_la_correlation",
    "direct_logit_attribution",
    "ar_accuracy",
    "ar_mean_rank",
    "induction_loss",
]


def cache_route(model, tokens, n: int) -> dict:
    """Every repeated-token metric the plain way: cache everything, then read the cache."""
    import torch

    logits, cache = model.run_with_cache(tokens)
    L = model.cfg.n_layers
    q = torch.arange(n, 2 * n, device=tokens.device)
    pattern = torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(L)])
    ps = pattern[:, :, :, q, q - n + 1]  # [layer, batch, head, query]
    out = {
        "prefix_matching": ps.mean((1, 3)),
        "prefix_matching_sd": ps.transpose(1, 2).flatten(2).std(-1, correction=0),
        "previous_token": pattern[:, :, :, q, q - 1].mean((1, 3)),
        "duplicate_token": pattern[:, :, :, q, q - n].mean((1, 3)),
    }
    z = torch.stack([cache[f"blocks.{layer}.attn.hook_z"] for layer in range(L)])[:, :, q]
    o = torch.einsum("lbqhe,lhed->lbqhd", z, model.W_O)  # every head's output
    s = torch.einsum("lbqhd,dbn->lbhqn", o, model.W_U[:, tokens[:, :n]])
    centred = s - s.mean(-1, keepdim=True)
    t = centred[..., (torch.arange(n, device=s.device) + 1) % n].diagonal(dim1=-2, dim2=-1)
    den = centred.clamp(min=0).sum(-1)
    la = torch.where(den > 0, t.clamp(min=0) / den.clamp(min=1e-30), 0.0)
    out["logit_attribution"] = la.mean((1, 3))
    y = tokens[:, q - n + 1]
    scale = cache["ln_final.hook_scale"][:, q]
    centred_o = o - o.mean(-1, keepdim=True)
    u = model.W_U[:, y].permute(1, 2, 0) * model.ln_final.w
    out["direct_logit_attribution"] = (
        (centred_o / scale.unsqueeze(0).unsqueeze(-1) * u.unsqueeze(2).unsqueeze(0)).sum(-1)
    ).mean((1, 2))
    ranks = (logits[:, q] > logits[:, q].gather(-1, y.unsqueeze(-1))).sum(-1)
    out["ar_accuracy"] = (ranks == 0).float().mean()
    out["induction_loss"] = torch.nn.functional.cross_entropy(
        logits[:, q].flatten(0, 1), y.flatten()
    )
    return out


def timed(fn, device: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    args = parse()
    if args.device == "cpu" and MMAP_ENV not in os.environ:
        os.environ[MMAP_ENV] = "65536"  # large blocks straight from / back to the system
        os.execv(sys.executable, [sys.executable, *sys.argv])
    import torch
    from transformer_lens.head_detector import detect_head

    import ihprobe

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(args, Path(tmp))
    model.cfg.default_prepend_bos = False  # detect_head tokenizes text: no BOS, like the others
    tokens = ihprobe.repeated_tokens(model, n=args.n, batch=args.batch, seed=0)
    prompts = ["".join(f"<{i}>" for i in row.tolist()) for row in tokens.cpu()]
    assert torch.equal(model.to_tokens(prompts[0])[0].cpu(), tokens[0].cpu())

    routes = {
        "forward": lambda: model(tokens),
        "ihprobe": lambda: ihprobe.scan(model, REPEATED, tokens=tokens, chunk=None),
        f"ihprobe, chunk {args.chunk}": lambda: ihprobe.scan(
            model, REPEATED, tokens=tokens, chunk=args.chunk
        ),
        "cache": lambda: cache_route(model, tokens, args.n),
        "detect_head": lambda: detect_head(model, prompts, "induction_head"),
        "detect_head x3": lambda: [detect_head(model, prompts, kind) for kind in HEAD_KINDS],
        "scan (all)": lambda: ihprobe.scan(model, tokens=tokens, batch=args.batch, chunk=None),
    }
    times: dict[str, list[float]] = {name: [] for name in routes}
    cpu: dict[str, list[float]] = {name: [] for name in routes}
    peaks: dict[str, int] = {}
    with torch.no_grad():
        for fn in routes.values():  # warm-up: one-time allocations and lazy initialisation
            fn()
        for name, fn in routes.items():
            with Peak(args.device) as peak:
                fn()
            peaks[name] = peak.peak
        for _ in range(args.repeats):
            for name, fn in routes.items():
                wall, used = timed(fn, args.device)
                times[name].append(wall)
                cpu[name].append(used)
        same = ihprobe.scan(model, ["prefix_matching"], tokens=tokens).head["prefix_matching"]
        theirs = detect_head(model, prompts[:4], "induction_head")
        ours4 = ihprobe.scan(model, ["prefix_matching"], tokens=tokens[:4]).head["prefix_matching"]
    assert torch.allclose(theirs.cpu(), ours4 / 2, atol=1e-5), "detect_head disagrees"
    assert same.shape == (args.layers, args.heads)

    chunked = f"ihprobe, chunk {args.chunk}"
    best = {name: min(t) for name, t in times.items()}  # best round: least disturbed
    used = {name: min(t) for name, t in cpu.items()}
    mib = 2**20
    rows = [
        "| route | wall (s) | wall / forward | CPU (s) | CPU / forward | peak memory (MiB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in routes:
        rows.append(
            f"| {name} | {best[name]:.3f} | {best[name] / best['forward']:.2f} | "
            f"{used[name]:.3f} | {used[name] / used['forward']:.2f} | {peaks[name] / mib:.0f} |"
        )
    ratios = [
        "- `detect_head` time / ihprobe time: wall "
        f"**{best['detect_head'] / best['ihprobe']:.1f}x**,"
        f" CPU **{used['detect_head'] / used['ihprobe']:.1f}x** for prefix matching alone; "
        f"wall **{best['detect_head x3'] / best['ihprobe']:.1f}x**, CPU "
        f"**{used['detect_head x3'] / used['ihprobe']:.1f}x** for its three head types "
        "(target >= 5x)",
        f"- `run_with_cache` peak memory / ihprobe peak memory: "
        f"**{peaks['cache'] / max(peaks['ihprobe'], 1):.1f}x** in one pass, "
        f"**{peaks['cache'] / max(peaks[chunked], 1):.1f}x** with `chunk={args.chunk}` "
        "(target >= 10x)",
        "- ihprobe time / bare forward time: wall "
        f"**{best['ihprobe'] / best['forward']:.2f}x**,"
        f" CPU **{used['ihprobe'] / used['forward']:.2f}x** (target <= 1.3x)",
    ]
    setup = (
        f"GPT-NeoX {args.layers} layers x {args.heads} heads, d_model {args.d_model}, vocab "
        f"{args.vocab}; batch {args.batch}, n {args.n} ({2 * args.n} tokens per row); device "
        f"{args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()}; best of {args.repeats} interleaved "
        f"rounds; load average {os.getloadavg()[0]:.1f} at the end."
    )
    text = "\n".join(
        ["## Probe battery (`lab/benchmarks/bench_probes.py`)", "", setup, "", *rows, ""]
    )
    text += "\n" + "\n".join(ratios) + "\n"
    if not args.device.startswith("cuda"):
        text += (
            "\nPeak memory is the rise of the resident set; allocations under 64 KiB come from "
            "memory the process already holds, so it misses batch-1 passes (`detect_head`).\n"
        )
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
