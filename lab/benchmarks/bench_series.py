"""A checkpoint series scanned with and without prefetching, side by side in one run.

A suite of random-initialised checkpoints of pythia-160m's config (bf16 safetensors, about
325 MB each) is laid out on local disk and scanned twice by ``ihprobe.trajectory``: once
reading each checkpoint only when it is scanned (``prefetch=0``), once reading the next one in
a background thread while the current one is scanned (``prefetch=1``). Before each pass the
suite's pages are dropped from the page cache (``posix_fadvise(DONTNEED)``), so every read
comes from the disk.

Each checkpoint's read (files checked, tensors read, checked finite and hashed: the engine's
``read_checked``) and its compute (weights swapped into the model, then the scan) are timed
where they run; the table gives the wall time of each pass against the sum of the reads plus the
sum of the computes, and against the larger of the two (what a perfect overlap would take).

It prints a markdown table and writes it into a section of ``lab/benchmarks/RESULTS_series.md``
(named by ``--section``, default the device), with the load average around the passes: the
target, at most 1.1x the larger sum, is against the plain pass's sums, where each step ran alone.
Run: ``.venv/bin/python lab/benchmarks/bench_series.py [--checkpoints 20] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import torch
from sections import write_section  # lab/benchmarks/ is the script's folder

METRICS = ["prefix_matching", "previous_token"]
TARGET = 1.1  # prefetching's wall time over the larger of the reads' and computes' sums
PYTHIA_160M = {
    "vocab_size": 50304,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 2048,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
}


def lay_out_suite(root: Path, count: int) -> list[Path]:
    """``count`` checkpoints of pythia-160m's config, each with different bytes in every tensor
    (no tokenizer: random-token probes need none, and ihprobe loads a stand-in)."""
    from safetensors.torch import save_file
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(**PYTHIA_160M, bos_token_id=0, eos_token_id=0)
    base = GPTNeoXForCausalLM(config).state_dict()
    base = {k: v + 0.02 * torch.randn_like(v) for k, v in base.items() if v.is_floating_point()}
    paths = []
    for i in range(count):
        directory = root / f"step-{i * 1000:06d}"
        directory.mkdir(parents=True)
        config.save_pretrained(directory)
        scale = 1.0 + 0.01 * (i + 1)  # distinct bytes per checkpoint, cheaply
        state = {k: (v * scale).to(torch.bfloat16).contiguous() for k, v in base.items()}
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        paths.append(directory)
    return paths


def evict(root: Path) -> None:
    """Drop the suite's files from the page cache, so the next pass reads them from disk."""
    for file in root.rglob("*"):
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


class Timings:
    """The engine's read and compute steps, wrapped to time each call where it runs."""

    def __init__(self):
        import ihprobe.series.checkpoint_rows as engine

        self.engine, self.reads, self.computes = engine, [], []
        self.read, self.call = engine.read_checked, engine.Loaded.__call__

    def __enter__(self):
        read, call, reads, computes = self.read, self.call, self.reads, self.computes

        def timed_read(path, *args):
            start = time.perf_counter()
            try:
                return read(path, *args)
            finally:
                reads.append(time.perf_counter() - start)

        def timed_call(loaded, *args, **kwargs):
            start = time.perf_counter()
            try:
                return call(loaded, *args, **kwargs)
            finally:
                computes.append(time.perf_counter() - start)

        self.engine.read_checked, self.engine.Loaded.__call__ = timed_read, timed_call
        return self

    def __exit__(self, *exc):
        self.engine.read_checked, self.engine.Loaded.__call__ = self.read, self.call


def one_pass(root: Path, paths, prefetch: int, device: str, scan: dict) -> dict:
    import ihprobe

    evict(root)
    with Timings() as times:
        start = time.perf_counter()
        table = ihprobe.trajectory(
            [str(p) for p in paths],
            METRICS,
            cache=False,
            progress=False,
            device=device,
            prefetch=prefetch,
            **scan,
        )
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    read, compute = sum(times.reads), sum(times.computes)
    return {"wall": wall, "read": read, "compute": compute, "table": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=8, help="probe rows per metric")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dir", default=None, help="where to lay out the suite (default /tmp)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS_series.md")))
    parser.add_argument("--section", default=None, help="section of --out (default: device)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    # the memory check sizes a scan by the config's 2,048-token context; these rows are short
    os.environ.setdefault("IHPROBE_NO_SIZE_LIMITS", "1")
    torch.set_num_threads(1 if args.device == "cpu" else torch.get_num_threads())
    scan = {"n": args.n, "batch": args.batch}
    tmp = Path(tempfile.mkdtemp(prefix="bench-series-", dir=args.dir))
    try:
        start = time.perf_counter()
        paths = lay_out_suite(tmp / "suite", args.checkpoints)
        laid = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (tmp / "suite").rglob("*.safetensors"))
        one_pass(tmp / "suite", paths[:2], 0, args.device, scan)  # warm up imports and kernels
        load = os.getloadavg()[0]
        plain = one_pass(tmp / "suite", paths, 0, args.device, scan)
        ahead = one_pass(tmp / "suite", paths, 1, args.device, scan)
        load = (load, os.getloadavg()[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    same = plain["table"].equals(ahead["table"])
    rows = [("no prefetch", plain), ("prefetch 1 ahead", ahead)]
    lines = [
        f"{args.checkpoints} random-initialised checkpoints of pythia-160m's config (bf16 "
        f"safetensors, {size / args.checkpoints / 1e6:.0f} MB each, laid out in {laid:.0f} s), "
        f"scanned by `ihprobe.trajectory` with {METRICS}, n={args.n}, batch={args.batch} on "
        f"{args.device} ({platform.machine()}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} torch threads); page cache dropped before each pass; "
        f"1-minute load average {load[0]:.1f} before the passes, {load[1]:.1f} after.",
        "",
        "| pass | wall s | sum of reads s | sum of computes s | wall / (reads + computes) "
        "| wall / max(reads, computes) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in rows:
        both, larger = r["read"] + r["compute"], max(r["read"], r["compute"])
        lines.append(
            f"| {name} | {r['wall']:.1f} | {r['read']:.1f} | {r['compute']:.1f} | "
            f"{r['wall'] / both:.2f} | {r['wall'] / larger:.2f} |"
        )
    alone = max(plain["read"], plain["compute"])  # the larger sum, each step run alone
    lines += [
        "",
        f"Prefetching / plain wall time: {ahead['wall'] / plain['wall']:.2f}. "
        f"Prefetching wall / the larger of the plain pass's sums (reads and computes each "
        f"timed alone): {ahead['wall'] / alone:.2f} (target: at most {TARGET}). "
        f"Tables identical: {same}.",
    ]
    text = "\n".join(lines)
    print(text)
    extra = "" if args.device == "cpu" else f" --device {args.device}"
    extra += f" --section {args.section}" if args.section else ""
    command = f"Command: `.venv/bin/python lab/benchmarks/bench_series.py{extra}`"
    write_section(Path(args.out), args.section or args.device, f"{command}\n\n{text}")


if __name__ == "__main__":
    main()
