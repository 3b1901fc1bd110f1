"""The device job's correctness checks: every public function on a device against the CPU's
numbers, and training (live probes, resume, trajectory, the demo) on the device.

``lab/benchmarks/device_job.py`` runs them as its ``correct-*`` steps; the tolerances are named
here:

>>> FP32["rtol"], BF16["rtol"], LOSS
(0.001, 0.05, 0.05)
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NATURAL = ROOT / "reference" / "natural-docs"
FP32 = {"rtol": 1e-3, "atol": 1e-4}  # float32 on two devices: summation order differs
BF16 = {"rtol": 0.05, "atol": 0.02}  # bfloat16's 8-bit mantissa; scores sum in float32
LOSS = 0.05  # nats: a training loss on two devices after the same updates
ROWS = {"batch": 8}


def _calls(light: bool):
    """name -> (float32 call, bfloat16 call or None). ``light``: ablate reads repeated tokens
    only (its text and task metrics cost the CPU's side minutes on a large model)."""
    import ihprobe

    smooth = ["prefix_matching", "induction_loss"]  # an accuracy flips on near-tied logits
    attended = ["prefix_matching", "previous_token", "duplicate_token"]
    recall = {"metrics": ["ar_accuracy", "ar_mean_rank", "induction_loss"]} if light else {}
    return {
        "scan": (lambda m: ihprobe.scan(m, **ROWS), lambda m: ihprobe.scan(m, smooth, **ROWS)),
        # the same scores from full patterns (scan's default reads pairs where it can): the
        # reference path on the device too
        "scan_patterns": (lambda m: ihprobe.scan(m, attended, attention="patterns", **ROWS), None),
        "ablate": (
            lambda m: ihprobe.ablate(m, top=2, random=3, **recall, **ROWS),
            lambda m: ihprobe.ablate(m, top=2, random=3, metrics=["induction_loss"], **ROWS),
        ),
        "head_effects": (
            lambda m: ihprobe.head_effects(m, ["ar_accuracy", "induction_loss"], batch=4),
            lambda m: ihprobe.head_effects(m, ["induction_loss"], batch=4),
        ),
        "composition": (lambda m: ihprobe.composition(m, "k", draws=50), None),
        "patch": (lambda m: ihprobe.patch(m, **ROWS), None),
        "path_patch": (lambda m: ihprobe.path_patch(m, [(0, 1)], [(1, 0)], **ROWS), None),
        "attribution_patch": (lambda m: ihprobe.attribution_patch(m, **ROWS), None),
        "loss_by_position": (lambda m: ihprobe.loss_by_position(m, text=_ids(m), rows=4), None),
    }


def _ids(model) -> torch.Tensor:
    """Seeded rows of token ids on the CPU (a random model has no tokenizer to read text)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(2, model.cfg.d_vocab, (4, 64), generator=generator)


MEASURED = ["value", "clean", "ablated", "change"]  # bf16: not ratios of near-zero changes


def compare(ours: pd.DataFrame, cpu: pd.DataFrame, tolerance: dict, columns=None) -> tuple:
    """(max |difference|, within tolerance) of two frames' numbers."""
    pick = (lambda t: t[[c for c in columns if c in t]]) if columns else lambda t: t
    a = pick(ours).select_dtypes("number").to_numpy(dtype=float)
    b = pick(cpu).select_dtypes("number").to_numpy(dtype=float)
    if a.shape != b.shape:
        return float("nan"), False
    both = ~(np.isnan(a) | np.isnan(b))
    worst = float(np.abs(a - b)[both].max()) if both.any() else 0.0
    return worst, bool(np.allclose(a, b, equal_nan=True, **tolerance))


def _frame(result) -> pd.DataFrame:
    return result if isinstance(result, pd.DataFrame) else result.to_frame()


def correct_model(source: Path, label: str, device: str, tiny: bool, rows=None) -> list[dict]:
    """Rows of the functions on ``source``: the device against the CPU, appended to ``rows``
    (a list that saves itself as it grows, say) as each is measured."""
    import ihprobe
    from ihprobe.core.devices import stray_tensors

    rows = [] if rows is None else rows
    cpu = ihprobe.load(source, device="cpu")
    here = ihprobe.load(source, device=device)
    half = ihprobe.load(source, device=device, dtype="bfloat16")
    tokens = _ids(cpu)
    with torch.no_grad():
        a, b = here(tokens.to(device)).float().cpu(), cpu(tokens)
    ok = bool(torch.allclose(a, b, **FP32)) and not stray_tensors(here, device)
    rows.append(row(label, "load (logits)", "float32", float((a - b).abs().max()), ok, FP32))
    for name, (call, smooth) in _calls(tiny or source != NATURAL).items():
        begin = time.perf_counter()
        try:
            worst, ok = compare(_frame(call(here)), _frame(call(cpu)), FP32)
            rows.append(row(label, name, "float32", worst, ok, FP32, time.perf_counter() - begin))
            if smooth is not None:
                worst, ok = compare(_frame(smooth(half)), _frame(smooth(cpu)), BF16, MEASURED)
                rows.append(row(label, name, "bfloat16", worst, ok, BF16))
        except Exception as err:  # noqa: BLE001 - one failed row, the others still run
            rows.append(failed(label, name, err))
    return rows


def row(model, function, dtype, worst, ok, tolerance, seconds=None) -> dict:
    """One row of the correctness table; ``tolerance`` a dict of allclose's or a sentence."""
    said = (
        tolerance
        if isinstance(tolerance, str)
        else ", ".join(f"{k} {v:g}" for k, v in tolerance.items())
    )
    return {
        "model": model,
        "function": function,
        "dtype": dtype,
        "max abs diff": worst,
        "tolerance": said,
        "result": "pass" if ok else "FAIL",
        "seconds": seconds,
    }


def failed(model, function, err) -> dict:
    line = f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"
    return {"model": model, "function": function, "result": f"FAIL ({line})"}


def correct_train(device: str, tiny: bool, rows=None) -> list[dict]:
    """train with live probes then resumed and extended; its trajectory; the demo."""
    import ihprobe
    from ihprobe import DemoConfig, TrainConfig, run_demo

    steps = 40 if tiny else 100
    tmp = Path(tempfile.mkdtemp())
    base = dict(
        producer="iid",
        producer_options={"vocab_size": 64},
        layers=2,
        heads=4,
        d_model=32,
        context=32,
        batch_size=8,
        steps=steps // 2,
        schedule="constant",
        checkpoints="linear",
        n_checkpoints=2,
        log_every=10,
        live_probes=True,
        probe_batch=8,
        progress=False,
    )
    runs, rows = [], [] if rows is None else rows  # runs: on the CPU, then on the device
    for i, where in enumerate(("cpu", device)):
        out = str(tmp / f"run-{i}-{where}")
        ihprobe.train(TrainConfig(out=out, device=where, **base))
        runs.append(
            ihprobe.train(
                TrainConfig(out=out, device=where, resume=True, **{**base, "steps": steps})
            )
        )
    probed = [len(records(r, "probes.jsonl")) for r in runs]
    last = [float(records(r, "metrics.jsonl")[-1]["loss"]) for r in runs]
    worst = abs(last[0] - last[1])
    ok = probed[0] == probed[1] == 5 and worst <= LOSS
    rows.append(
        row(
            "trained here",
            f"train {steps} + resume",
            "float32",
            worst,
            ok,
            f"final loss within {LOSS} nats; 5 live probes",
        )
    )
    tables = [
        ihprobe.trajectory(
            runs[1],
            ["prefix_matching", "induction_loss"],
            device=w,
            cache=False,
            progress=False,
            batch=8,
        )
        for w in (device, "cpu")
    ]
    worst, ok = compare(*tables, FP32)
    rows.append(row("trained here", "trajectory", "float32", worst, ok, FP32))
    begin = time.perf_counter()
    demo = DemoConfig(
        out=str(tmp / "demo"), progress=False, steps=60 if tiny else 300, n_checkpoints=7, random=3
    )
    result = run_demo(demo)  # trains with device="auto": the device where there is one
    ok = result.report.is_file()
    rows.append(
        row(
            "demo",
            "demo (device auto)",
            "float32",
            float("nan"),
            ok,
            "report written",
            time.perf_counter() - begin,
        )
    )
    return rows


def records(run: Path, name: str) -> list[dict]:
    """The lines of one of a finished run's JSONL logs (``metrics.jsonl``, ``probes.jsonl``)."""
    return [json.loads(line) for line in (Path(run) / name).read_text().splitlines()]


def random_160m(tiny: bool) -> Path:
    """A random model of Pythia-160m's configuration (``tiny``: 2 small layers), saved once."""
    from bench_scale import random_model

    directory = Path(tempfile.gettempdir()) / f"ihprobe-device-job-{'tiny' if tiny else '160m'}"
    if not (directory / "config.json").is_file():
        random_model("tiny" if tiny else "160m").save_pretrained(directory)
    return directory
