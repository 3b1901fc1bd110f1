"""The device job's ``offload`` step (issue 62): ``scan`` and ``ablate`` of a model placed by a
device map, timed against the same model on one device where it fits, and checked equal to it.

- several GPUs: ``device_map="auto"`` over every visible GPU, each capped (``max_memory``) at
  60% of the model, so it does not fit one of them and is spread over the GPUs alone;
- one GPU: a smaller model split across the GPU and the CPU. TransformerLens's bridge refuses a
  map that mixes a GPU with the CPU or disk, and ihprobe says so in one line (a row records
  that line); the step then lifts that rule for its own measurement (labelled "rule lifted")
  twice: ``device_map="auto"`` (the CPU's layers run on the GPU, their weights brought in per
  pass) and a map dispatched with ``main_device="cpu"`` (each half runs where it is, so every
  per-layer result meets two devices);
- the CPU (``--tiny``, the suite's mode): a tiny model split across the CPU and the disk.

Every placement is its own rows: one that fails is a row saying why, never the end of the step.
The model is built on the device with random weights and saved once (a temporary folder).

    python lab/benchmarks/device_offload.py --device cuda
    python lab/benchmarks/device_offload.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import ihprobe

ROWS = {"tiny": 2, "one-gpu": 8, "gpus": 16}  # probe rows of each timed call (one GPU: 3 maps)
SHAPES = {  # (layers, d_model, heads, vocab): float32 sizes ~0.7 MB, ~0.65 GB, ~1.6 GB
    "tiny": (12, 32, 4, 128),
    "one-gpu": (12, 768, 12, 50304),
    "gpus": (24, 1024, 16, 50304),
}
COLUMNS = ("call", "model MB", "placed over", "placed s", "one device s", "x slower", "note")
LIFTED = " (TransformerLens's rule lifted)"


def gpu_count(device: str) -> int:
    """The GPUs a map may use: every visible one when ``device`` is a GPU, else none."""
    return torch.cuda.device_count() if device.startswith("cuda") else 0


def shape_of(device: str, tiny: bool) -> str:
    return "tiny" if tiny else ("gpus" if gpu_count(device) > 1 else "one-gpu")


def build(folder: Path, device: str, shape: str) -> int:
    """A random GPT-NeoX built on ``device`` and saved to ``folder``; its bytes of weights."""
    layers, width, heads, vocab = SHAPES[shape]
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
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    del model
    return size


@contextlib.contextmanager
def lifted():
    """TransformerLens's refusal of a map mixing a GPU with the CPU or disk switched off (and
    with it ihprobe's line, which asks the same test): for this measurement only."""
    from transformer_lens.utilities import multi_gpu

    with mock.patch.object(multi_gpu, "is_mixed_offload_gpu", lambda values: False):
        yield


def placements(device: str, size: int, folder: Path) -> list[tuple[str, object]]:
    """(what the map spans, a function loading the placed model) for this machine."""
    model = folder / "model"
    gpus = gpu_count(device)
    if gpus > 1:
        caps = {i: int(0.6 * size) for i in range(gpus)}  # fits no single GPU, all of them
        spans = f"{gpus} GPUs, at most 60% of the model each"
        return [(spans, lambda: ihprobe.load(model, device_map="auto", max_memory=caps))]
    if gpus == 1:
        caps = {0: size // 2, "cpu": 2 * size}
        auto = lambda: ihprobe.load(model, device_map="auto", max_memory=caps)  # noqa: E731
        return [
            ("the GPU and the CPU by auto", auto),
            ("the GPU and the CPU by auto" + LIFTED, lambda: with_lifted(auto)),
            ("the GPU and the CPU, each running its half" + LIFTED, lambda: split(model)),
        ]
    where = {"max_memory": {"cpu": max(size // 8, 1)}, "offload_folder": str(folder / "off")}
    spans = "the CPU and the disk, 1/8 on the CPU"
    return [(spans, lambda: ihprobe.load(model, device_map="auto", **where))]


def with_lifted(load):
    with lifted():
        return load()


def split(folder: Path):
    """The embedding and the first half of the layers run on the CPU, the rest, the final norm
    and the unembedding on GPU 0 (accelerate's ``dispatch_model`` with ``main_device="cpu"``):
    a model whose per-layer activations come back on two devices."""
    from accelerate import dispatch_model

    hf = GPTNeoXForCausalLM.from_pretrained(folder).eval()
    layers, base, places = hf.config.num_hidden_layers, hf.base_model_prefix, {}
    for name, _ in getattr(hf, base).named_children():  # embedding, layers, final norm...
        if name == "layers":
            places |= {f"{base}.layers.{i}": "cpu" if i < layers // 2 else 0 for i in range(layers)}
        else:
            places[f"{base}.{name}"] = 0 if name == "final_layer_norm" else "cpu"
    places |= {name: 0 for name, _ in hf.named_children() if name != base}  # the unembedding
    dispatch_model(hf, device_map=places, main_device="cpu")
    with lifted():
        return ihprobe.load(hf)


def synchronize() -> None:
    """Drain every visible GPU's queue (a split model runs on several)."""
    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        torch.cuda.synchronize(index)


def timed(call, model) -> tuple[float, object]:
    """(seconds, result) of ``call(model)``, the devices' queues drained on both sides."""
    synchronize()
    begin = time.perf_counter()
    found = call(model)
    synchronize()
    return time.perf_counter() - begin, found


def row(**cells) -> dict:
    """One table row with every column, in one order, ``max difference`` last."""
    return {name: cells.get(name) for name in COLUMNS} | {"max difference": cells.get("differ")}


def speed_offload(device: str, tiny: bool, rows: list | None = None) -> list[dict]:
    """Rows per placement and call (scan, ablate): seconds placed and on one device, and the
    largest difference between their numbers; a placement that fails is one row saying why.
    Each row is appended to ``rows`` (the job's ``SavedRows``) as soon as it is measured."""
    found = [] if rows is None else rows
    shape = shape_of(device, tiny)
    batch = ROWS[shape]
    calls = {
        "scan": lambda m: ihprobe.scan(m, ["prefix_matching", "copying"], batch=batch).to_frame(),
        "ablate": lambda m: ihprobe.ablate(
            m, top=1, draws=2, batch=batch, metrics=["induction_loss", "ar_accuracy"]
        ).to_frame(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        size = build(Path(tmp) / "model", device, shape)
        megabytes = round(size / 1e6, 1)
        whole = ihprobe.load(Path(tmp) / "model", device=device)
        reference = {}
        for name, call in calls.items():
            if not tiny:  # warm-up: kernels, allocator caches
                call(whole)
            reference[name] = timed(call, whole)
        for spans, load in placements(device, size, Path(tmp)):
            measured(spans, load, calls, reference, megabytes, tiny, found)
    return found


def measured(spans, load, calls, reference, megabytes, tiny, done=None) -> list[dict]:
    """The rows of one placement: each call timed and compared, or one row of what failed;
    each appended to ``done`` (a new list by default) once measured, and the list returned."""
    model, where = None, {"model MB": megabytes, "placed over": spans}
    done = [] if done is None else done
    try:
        model = load()
        for name, call in calls.items():
            if not tiny:
                call(model)
            seconds, there = timed(call, model)
            one, here = reference[name]
            differ = float((there["value"] - here["value"]).abs().max())
            times = {"placed s": round(seconds, 3), "one device s": round(one, 3)}
            times["x slower"] = round(seconds / one, 2)
            done.append(row(call=name, **where, **times, differ=differ))
        return done
    except Exception as err:  # noqa: BLE001 - the row says what failed; the next placement runs
        said = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        done.append(row(call="load, scan, ablate", **where, note=said))
        return done
    finally:
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a tiny model: the CPU mode")
    opts = parser.parse_args(argv)
    for found in speed_offload(opts.device, opts.tiny):
        print(json.dumps(found))


if __name__ == "__main__":
    main()
