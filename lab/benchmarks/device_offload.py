"""The device job's ``offload`` step (issue 62): ``scan`` and ``ablate`` of a model placed by
``device_map="auto"``, timed against the same model on one device where it fits, and checked
equal to it.

- several GPUs: the model's weights are capped to half of them per GPU (``max_memory``), so it
  does not fit one GPU and accelerate spreads it over every visible one;
- one GPU: a smaller model split across the GPU and the CPU (half its weights each), so the
  path runs with one card;
- the CPU (``--tiny``, the suite's mode): a tiny model split across the CPU and the disk.

The model is built on the device with random weights and saved once (a temporary folder).

    python lab/benchmarks/device_offload.py --device cuda
    python lab/benchmarks/device_offload.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import ihprobe

ROWS = {"tiny": 2, "gpu": 16}  # probe rows of each timed call
SHAPES = {  # (layers, d_model, heads, vocab): 12 x 32 is ~0.7 MB, 24 x 1024 ~1.4 GB in float32
    "tiny": (12, 32, 4, 128),
    "gpu": (24, 1024, 16, 50304),
}


def build(folder: Path, device: str, tiny: bool) -> int:
    """A random GPT-NeoX built on ``device`` and saved to ``folder``; its bytes of weights."""
    layers, width, heads, vocab = SHAPES["tiny" if tiny else "gpu"]
    config = GPTNeoXConfig(
        vocab_size=vocab,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        max_position_embeddings=2048,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = GPTNeoXForCausalLM(config).eval()
    model.save_pretrained(folder)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def placement(device: str, size: int, folder: Path) -> tuple[str, dict]:
    """(what the map spans, the ``ihprobe.load`` keywords that place a ``size``-byte model)."""
    gpus = torch.cuda.device_count() if device.startswith("cuda") else 0
    if gpus > 1:
        caps = {i: size // 2 + 1 for i in range(gpus)} | {"cpu": size}  # fits no single GPU
        return f"{gpus} GPUs, at most half the model each", {"max_memory": caps}
    if gpus == 1:
        return "the GPU and the CPU, half each", {"max_memory": {0: size // 2, "cpu": 2 * size}}
    where = {"max_memory": {"cpu": max(size // 8, 1)}, "offload_folder": str(folder)}
    return "the CPU and the disk, 1/8 on the CPU", where


def timed(call, model) -> tuple[float, object]:
    """(seconds, result) of ``call(model)``, the device's queue drained on both sides."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    begin = time.perf_counter()
    found = call(model)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - begin, found


def speed_offload(device: str, tiny: bool) -> list[dict]:
    """One row per call (scan, ablate): seconds placed and on one device, and the largest
    difference between their numbers."""
    rows = ROWS["tiny" if tiny else "gpu"]
    calls = {
        "scan": lambda m: ihprobe.scan(m, ["prefix_matching", "copying"], batch=rows).to_frame(),
        "ablate": lambda m: ihprobe.ablate(m, top=1, random=2, batch=rows).to_frame(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        size = build(Path(tmp) / "model", device, tiny)
        spans, where = placement(device, size, Path(tmp) / "offload")
        placed = ihprobe.load(Path(tmp) / "model", device_map="auto", **where)
        whole = ihprobe.load(Path(tmp) / "model", device=device)
        found = []
        for name, call in calls.items():
            if not tiny:  # warm-up: kernels, allocator caches
                call(placed), call(whole)
            seconds, there = timed(call, placed)
            one, here = timed(call, whole)
            differ = (there["value"] - here["value"]).abs().max()
            found.append(
                {
                    "call": name,
                    "model MB": round(size / 1e6, 1),
                    "placed over": spans,
                    "placed s": round(seconds, 3),
                    "one device s": round(one, 3),
                    "x slower": round(seconds / one, 2),
                    "max difference": float(differ),
                }
            )
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a tiny model: the CPU mode")
    opts = parser.parse_args(argv)
    for row in speed_offload(opts.device, opts.tiny):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
