"""The device job's steps, each run in a child process of its own (``device_job.py --step``):
what each step runs. The job itself (the order, the limits, the results file) is
``device_job.py``; a step that returns rows from a module of this folder is one line of
``ROW_STEPS``.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path

from device_job import HERE, NATURAL_GPU, NATURAL_LOG, ROOT, SavedRows, run_group

# step -> (module, function(device, tiny, rows)): it appends each row to ``rows`` (a SavedRows,
# written as each is appended) as soon as it is measured, so a step stopped at its limit keeps them
ROW_STEPS = {
    "offload": ("device_offload", "speed_offload"),  # device_map="auto" against one device
    "fv": ("device_fv", "speed_fv"),  # fv_scores' fast path against the per-head loop
}


def step(name: str, device: str, tiny: bool, limit: float, out: Path) -> dict:
    """Run one step in this process; {"rows": [...]} or {"text": ...} (``out``: where its
    result goes, and its rows so far while it runs)."""
    warnings.simplefilter("ignore")
    if name.startswith("correct-"):
        import device_checks as checks

        rows = SavedRows(out)  # a step stopped at its limit keeps the rows it measured
        if name == "correct-natural":
            checks.correct_model(checks.NATURAL, "natural-docs", device, tiny, rows)
        elif name == "correct-160m":
            label = "tiny random" if tiny else "pythia-160m config, random"
            checks.correct_model(checks.random_160m(tiny), label, device, tiny, rows)
        else:
            checks.correct_train(device, tiny, rows)
        return {"rows": list(rows)}
    if name.startswith("seeds-"):
        from device_seeds import speed_seeds

        return {"rows": speed_seeds(int(name.split("-")[1]), device, tiny)}
    if name == "speed-scale":
        sizes, rows = ("tiny", "4") if tiny else ("160m,410m,1.4b", "100")
        dtype = "float32" if device == "cpu" else "bfloat16"
        argv = ["--sizes", sizes, "--tasks", "scan_all,ablate_ranked", "--rows", rows]
        argv += ["--repeats", "1" if tiny else "2", "--device", device, "--dtype", dtype]
        return {"text": _script("bench_scale.py", argv, limit)}
    if name in ROW_STEPS:  # a module of this folder whose function returns the step's rows
        module, function = ROW_STEPS[name]
        rows = SavedRows(out)
        getattr(importlib.import_module(module), function)(device, tiny, rows)
        return {"rows": list(rows)}
    if name == "speed-train":  # 200 updates take 2 s on an H200: setup would weigh
        steps, repeats = ("5", "1") if tiny else ("2000", "1")
        argv = ["--device", device, "--steps", steps, "--repeats", repeats]
        return {"text": _script("bench_train.py", argv, limit)}
    if name == "speed-fastpath":  # its own sections of RESULTS_fastpath.md, named cuda
        argv = ["--device", device, "--repeats", "1", "--long-layers", "2"]
        return {"text": _script("bench_fastpath.py", argv, limit)}
    if name == "speed-series":  # its own section of RESULTS_series.md, named by the device
        return {"text": _script("bench_series.py", ["--device", device], limit)}
    if name == "natural-study":
        command = os.environ.get(NATURAL_GPU)
        if not command:
            return {"text": f"not run: ${NATURAL_GPU} names no command (no-op)."}
        shell = f"cd {ROOT} && ({command}) > {NATURAL_LOG} 2>&1"
        code, _, _ = run_group(["bash", "-c", shell], max(1, limit))
        said = "stopped at the time limit (resumable)" if code is None else f"exit {code}"
        tail = NATURAL_LOG.read_text(errors="replace").splitlines()[-3:]
        lines = "".join(f"\n    {line}" for line in tail)
        return {"text": f"`{command}`: {said} within {limit:.0f} s; its log ends:\n{lines}"}
    raise ValueError(name)


def _script(name: str, argv: list[str], limit: float) -> str:
    """The table another benchmark prints (the lines from its first ``|`` row on); what it
    printed so far when it runs out of time."""
    code, out, err = run_group([sys.executable, str(HERE / name), *argv], max(1, limit - 5))
    if code is None:
        return f"timed out after {limit - 5:.0f} s; measured so far:\n\n```\n{out}```"
    if code:
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else "failed")
    lines = out.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    return "\n".join(lines[max(0, first - 2) :])
