"""The device job's ``fv`` step (issue 61, item 6): ``bench_fv.py``'s comparison on the device.

``ihprobe.fv_scores``' fast path (one cached corrupted pass per prompt length, then each
head's last-token pass) against the per-head reference loop (one whole patched pass per head),
on ``bench_fv.py``'s model of Pythia-160m's shape with random weights (``--tiny``: a 2-layer
model of the same kind) and its task, both methods in this process on the device, float32. Each
row: a method's wall seconds (the device synchronised), CPU seconds, peak memory (the device's
peak allocation on a GPU, reset per method; on a CPU the process's peak RSS so far), the speed-up
of the fast path, and the largest difference between the two methods' probabilities against
the largest indirect effect (``TOLERANCE`` of it: the suite's own bound).

    python lab/benchmarks/device_job.py --steps fv              # on a lent GPU
    python lab/benchmarks/device_job.py --device cpu --tiny --steps fv
"""

from __future__ import annotations

import resource
import tempfile
import time
import warnings
from pathlib import Path

import torch

TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 256,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
}
PROMPTS = {"gpu": 25, "tiny": 4}  # prompts per task: fv_scores' default on a GPU
TOLERANCE = 1e-3  # of the largest indirect effect (tests/unit/test_fv_fast.py)


def _synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_mb(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(model, task: Path, method: str, prompts: int, device: str) -> tuple[dict, torch.Tensor]:
    """One method's row and its probabilities ``[group, prompt]``."""
    import ihprobe

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    _synchronise(device)
    cpu, wall = time.process_time(), time.perf_counter()
    result = ihprobe.fv_scores(model, [task], shots=10, prompts=prompts, method=method)
    _synchronise(device)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    row = {"method": result.settings["method"], "prompts": prompts, "wall s": wall, "CPU s": cpu}
    row["peak MB"] = _peak_mb(device)
    return row, result.tasks[0].probabilities.double().cpu()


def speed_fv(device: str, tiny: bool, rows: list | None = None) -> list[dict]:
    """The fast path and the reference loop on ``device``: two rows, the second with the ratios
    (appended to ``rows``, the job's ``SavedRows``, together: the second compares them)."""
    import bench_fv  # lab/benchmarks/: the script's folder

    import ihprobe

    config, label = (TINY, "tiny random") if tiny else (bench_fv.PYTHIA_160M, "pythia-160m shape")
    prompts = PROMPTS["tiny" if tiny else "gpu"]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = bench_fv.build(Path(tmp), config)
        model = ihprobe.load(tmp, device=device)
        ihprobe.fv_scores(model, [task], shots=2, prompts=2)  # warm-up: kernels, allocator
        reference, ref_p = timed(model, task, "reference", prompts, device)
        fast, fast_p = timed(model, task, "fast", prompts, device)
    gap = float((fast_p - ref_p).abs().max())
    effect = float((ref_p[1:] - ref_p[0]).abs().max())
    fast["x wall"] = reference["wall s"] / fast["wall s"]
    fast["x CPU"] = reference["CPU s"] / fast["CPU s"]
    fast["max abs difference"] = gap
    fast["largest effect"] = effect
    fast["result"] = "pass" if gap <= TOLERANCE * max(effect, 1e-12) else "FAIL"
    found = [] if rows is None else rows
    for measured in (reference, fast):
        found.append({"model": label, "device": device, **measured})  # SavedRows writes each
    return found
