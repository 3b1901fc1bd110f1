"""The prepared device job: every public function on the device against the CPU, the speed
ratios, and the natural-text study's GPU step, each step under its own time limit.

    python benchmarks/device_job.py                      # a lent GPU: --device cuda, 8 minutes
    python benchmarks/device_job.py --device cpu --tiny  # the CPU mode the test suite runs

Steps, in order (``STEPS``; each runs in its own process with its own limit, so a failure or
a timeout is one row of the results, never the end of the job):

1. ``correct-natural``, ``correct-160m``: every public function (``_calls``: load, scan,
   ablate, head_effects, composition, patch, path_patch, attribution_patch, loss_by_position)
   on the device and on the CPU (max abs diff: the device's numbers from the CPU's), on
   ``reference/natural-docs`` and on a random model of Pythia-160m's configuration
   (``--tiny``: a tiny one); float32 numbers within ``FP32``, and scan, ablate and
   head_effects in bfloat16 on the device within ``BF16`` of the CPU's float32;
2. ``correct-train``: train (live probes, then resumed and extended), the run's trajectory on
   the device against the CPU's, and the demo with ``device="auto"``;
3. ``speed-scale``: ``bench_scale.py`` (scan and ablate against the bare forward, bfloat16,
   at 160m, 410m and 1.4b);
4. ``speed-train``: ``bench_train.py`` (ihprobe train against a bare loop and HF Trainer);
5. ``seeds-K``: the aggregate tokens/s of K runs sharing the device, one step per K
   (``ihprobe sweep --per-device K``) at K = 1, 4, 8, 16 (``--tiny``: 1, 2), in the shape of
   the natural-text recipe ``d128-B16`` (iid tokens of its 512-id vocabulary: the speed
   depends on the shape, not the text);
6. ``natural-study``: whatever time is left goes to the command in ``$IHPROBE_NATURAL_GPU``
   (the natural-text study's GPU configuration, resumable: it must skip what it finished);
   without it, the step is a no-op row.

It writes its tables, with the device named, into ``benchmarks/RESULTS_device.md``
(``--results`` elsewhere). The machine needs torch and transformers; the README's "On a GPU"
section names the wheels to carry for the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ihprobe.jobs.grid import markdown as table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "RESULTS_device.md"
NATURAL = ROOT / "reference" / "natural-docs"
FP32 = {"rtol": 1e-3, "atol": 1e-4}  # float32 on two devices: summation order differs
BF16 = {"rtol": 0.05, "atol": 0.02}  # bfloat16's 8-bit mantissa; scores sum in float32
LOSS = 0.05  # nats: a training loss on two devices after the same updates
ROWS = {"batch": 8}
NATURAL_GPU = "IHPROBE_NATURAL_GPU"  # the natural-text study's GPU step (a shell command)
# (name, seconds on a GPU, seconds in --tiny): 8 minutes in all on one H200
# (None: not in that mode; 0: whatever time is left)
STEPS = (("correct-natural", 40, 90), ("correct-160m", 80, 60), ("correct-train", 60, 120),
         ("speed-scale", 110, 120), ("speed-train", 50, 90), ("seeds-1", 25, 60),
         ("seeds-2", None, 90), ("seeds-4", 30, None), ("seeds-8", 35, None),
         ("seeds-16", 50, None), ("natural-study", 0, 0))  # fmt: skip
SEED_STEPS = 2000  # updates of one run alone; K runs take SEED_STEPS / K each (at least 300)
BUDGET = {"gpu": 480, "tiny": 720}
RECIPE = ("--arch", "gpt-neox", "--layers", "2", "--heads", "4", "--d-model", "128",
          "--context", "256", "--batch-size", "16", "--lr", "3e-3", "--producer", "iid",
          "--vocab-size", "512", "--schedule", "constant", "--checkpoints", "linear",
          "--n-checkpoints", "1", "--state-every", "0", "--log-every", "50")  # fmt: skip


def _calls(light: bool):
    """name -> (float32 call, bfloat16 call or None). ``light``: ablate reads repeated tokens
    only (its text and task metrics cost the CPU's side minutes on a large model)."""
    import ihprobe

    smooth = ["prefix_matching", "induction_loss"]  # an accuracy flips on near-tied logits
    recall = {"metrics": ["ar_accuracy", "ar_mean_rank", "induction_loss"]} if light else {}
    return {
        "scan": (lambda m: ihprobe.scan(m, **ROWS), lambda m: ihprobe.scan(m, smooth, **ROWS)),
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


def correct_model(source: Path, label: str, device: str, tiny: bool) -> list[dict]:
    """Rows of the functions on ``source``: the device against the CPU."""
    import ihprobe
    from ihprobe.core.devices import stray_tensors

    rows = []
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
    said = tolerance if isinstance(tolerance, str) else ", ".join(
        f"{k} {v:g}" for k, v in tolerance.items())  # fmt: skip
    return {"model": model, "function": function, "dtype": dtype, "max abs diff": worst,
            "tolerance": said, "result": "pass" if ok else "FAIL",
            "seconds": seconds}  # fmt: skip


def failed(model, function, err) -> dict:
    line = f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"
    return {"model": model, "function": function, "result": f"FAIL ({line})"}


def correct_train(device: str, tiny: bool) -> list[dict]:
    """train with live probes then resumed and extended; its trajectory; the demo."""
    import ihprobe
    from ihprobe.io.runs import RunDir, losses
    from ihprobe.jobs.demo import DemoConfig, run_demo
    from ihprobe.training.trainer import TrainConfig

    steps = 40 if tiny else 100
    tmp = Path(tempfile.mkdtemp())
    base = dict(producer="iid", producer_options={"vocab_size": 64}, layers=2, heads=4,
                d_model=32, context=32, batch_size=8, steps=steps // 2, schedule="constant",
                checkpoints="linear", n_checkpoints=2, log_every=10, live_probes=True,
                probe_batch=8, progress=False)  # fmt: skip
    runs, rows = [], []  # on the CPU, then on the device
    for i, where in enumerate(("cpu", device)):
        out = str(tmp / f"run-{i}-{where}")
        ihprobe.train(TrainConfig(out=out, device=where, **base))
        runs.append(ihprobe.train(TrainConfig(out=out, device=where, resume=True,
                                              **{**base, "steps": steps})))  # fmt: skip
    probed = [len(RunDir(r).records("probes.jsonl")) for r in runs]
    last = [float(losses(r)["loss"].iloc[-1]) for r in runs]
    worst = abs(last[0] - last[1])
    ok = probed[0] == probed[1] == 5 and worst <= LOSS
    rows.append(row("trained here", f"train {steps} + resume", "float32", worst, ok,
                    f"final loss within {LOSS} nats; 5 live probes"))  # fmt: skip
    tables = [ihprobe.trajectory(runs[1], ["prefix_matching", "induction_loss"], device=w,
                                 cache=False, progress=False, batch=8)
              for w in (device, "cpu")]  # fmt: skip
    worst, ok = compare(*tables, FP32)
    rows.append(row("trained here", "trajectory", "float32", worst, ok, FP32))
    begin = time.perf_counter()
    demo = DemoConfig(out=str(tmp / "demo"), progress=False, steps=60 if tiny else 300,
                      n_checkpoints=7, random=3)  # fmt: skip
    result = run_demo(demo)  # trains with device="auto": the device where there is one
    ok = result.report.is_file()
    rows.append(row("demo", "demo (device auto)", "float32", float("nan"), ok, "report written",
                    time.perf_counter() - begin))  # fmt: skip
    return rows


def random_160m(tiny: bool) -> Path:
    """A random model of Pythia-160m's configuration (``tiny``: 2 small layers), saved once."""
    from bench_scale import random_model

    directory = Path(tempfile.gettempdir()) / f"ihprobe-device-job-{'tiny' if tiny else '160m'}"
    if not (directory / "config.json").is_file():
        random_model("tiny" if tiny else "160m").save_pretrained(directory)
    return directory


def speed_seeds(k: int, device: str, tiny: bool) -> list[dict]:
    """Aggregate tokens/s of ``k`` runs of the recipe side by side on the device: the sum of
    each run's median speed over its log lines (the loop alone), and all their tokens over the
    wall time (process starts included)."""
    from ihprobe.io.runs import RunDir
    from ihprobe.jobs import sweep

    tiny_shape = ("--d-model", "32", "--context", "64", "--batch-size", "4") if tiny else ()
    steps = 60 if tiny else max(SEED_STEPS // k, 300)
    runs = sweep.plan([f"seed={','.join(str(s) for s in range(k))}"], Path(tempfile.mkdtemp()))
    begin = time.perf_counter()
    status = sweep.train_all(runs, (*RECIPE, *tiny_shape, "--steps", str(steps)), per_device=k)
    wall = time.perf_counter() - begin
    records = [RunDir(r.out).records("metrics.jsonl") for r in runs]
    inner = sum(float(np.median([x["tokens_per_s"] for x in r])) for r in records if r)
    tokens = sum(r[-1]["tokens"] for r in records if r)
    finished = sum(code == 0 for code in status.values())
    return [{"K": k, "updates per run": steps, "runs finished": finished,
             "tokens/s (sum in loop)": round(inner), "tokens/s (wall)": round(tokens / wall),
             "wall s": round(wall, 1)}]  # fmt: skip


def seeds_table(results: dict[str, dict]) -> str:
    """The K-seed steps as one table, each K against one process (K = 1)."""
    rows = [r for name, res in results.items() if name.startswith("seeds-") for r in res.get(
        "rows", [])]  # fmt: skip
    one = next((r["tokens/s (sum in loop)"] for r in rows if r["K"] == 1), None)
    for r in rows:
        r["x one process"] = round(r["tokens/s (sum in loop)"] / one, 2) if one else None
    failed = [f"{n}: {r['error']}" for n, r in results.items() if n.startswith("seeds-")
              and "error" in r]  # fmt: skip
    text = markdown("speed-seeds", {"rows": rows, "seconds": "-"}) if rows else ""
    return text + "".join(f"\nfailed: {f}\n" for f in failed)


def step(name: str, device: str, tiny: bool, limit: float) -> dict:
    """Run one step in this process; {"rows": [...]} or {"text": ...}."""
    warnings.simplefilter("ignore")
    if name == "correct-natural":
        return {"rows": correct_model(NATURAL, "natural-docs", device, tiny)}
    if name == "correct-160m":
        label = "tiny random" if tiny else "pythia-160m config, random"
        return {"rows": correct_model(random_160m(tiny), label, device, tiny)}
    if name == "correct-train":
        return {"rows": correct_train(device, tiny)}
    if name.startswith("seeds-"):
        return {"rows": speed_seeds(int(name.split("-")[1]), device, tiny)}
    if name == "speed-scale":
        sizes, rows = ("tiny", "4") if tiny else ("160m,410m,1.4b", "100")
        dtype = "float32" if device == "cpu" else "bfloat16"
        argv = ["--sizes", sizes, "--tasks", "scan_all,ablate_ranked", "--rows", rows, "--repeats",
                "1" if tiny else "2", "--device", device, "--dtype", dtype]  # fmt: skip
        return {"text": _script("bench_scale.py", argv, limit)}
    if name == "speed-train":
        argv = ["--device", device, "--steps", "5" if tiny else "200", "--repeats",
                "1" if tiny else "2"]  # fmt: skip
        return {"text": _script("bench_train.py", argv, limit)}
    if name == "natural-study":
        command = os.environ.get(NATURAL_GPU)
        if not command:
            return {"text": f"not run: ${NATURAL_GPU} names no command (no-op)."}
        code, _, _ = run_group(["bash", "-c", f"cd {ROOT} && {command}"], max(1, limit))
        said = "stopped at the time limit (resumable)" if code is None else f"exit {code}"
        return {"text": f"`{command}`: {said} within {limit:.0f} s."}
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


def run_group(argv: list[str], limit: float) -> tuple[int | None, str, str]:
    """(exit status, stdout, stderr) of ``argv`` run in a process group of its own; past
    ``limit`` seconds the whole group is killed (the runs a step started go with it) and the
    status is None."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=limit)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def run_step(name: str, opts, limit: float) -> dict:
    """One step in a child process under ``limit`` seconds; a failure is what it says."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    argv = [sys.executable, __file__, "--step", name, "--device", opts.device, "--limit",
            str(limit), "--step-out", str(out), *(["--tiny"] if opts.tiny else [])]  # fmt: skip
    begin = time.perf_counter()
    code, _, err = run_group(argv, limit + 10)
    if code is None:
        result = {"error": f"timed out after {limit:.0f} s"}
    else:
        result = json.loads(out.read_text()) if out.stat().st_size else {}
        if code or not result:
            tail = err.strip().splitlines()[-1:] or ["no output"]
            result = {"error": f"exit {code}: {tail[0][:200]}"}
    result["seconds"] = round(time.perf_counter() - begin, 1)
    out.unlink(missing_ok=True)
    return result


def markdown(name: str, result: dict) -> str:
    head = f"### {name} ({result['seconds']} s)\n\n"
    if "error" in result:
        return head + f"failed: {result['error']}\n"
    if "rows" in result:  # columns in the order the rows first name them
        return head + "\n".join(table(pd.DataFrame(result["rows"]).map(_cell))) + "\n"
    return head + result["text"] + "\n"


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def where(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(torch.device(device))} ({device})"
    return f"{os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small models: the CPU mode")
    parser.add_argument("--steps", help="comma-separated subset of the steps (default: all)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--section", help="section of the results file (default: the device)")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--step-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=60, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if opts.step:  # the child: one step, its JSON to --step-out
        try:
            result = step(opts.step, opts.device, opts.tiny, opts.limit)
        except Exception as err:  # noqa: BLE001 - the parent records it as the step's row
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"[:300]}
        opts.step_out.write_text(json.dumps(result, default=float))
        return
    from bench_scale import write_section

    chosen = opts.steps.split(",") if opts.steps else [name for name, _, _ in STEPS]
    budget = BUDGET["tiny" if opts.tiny else "gpu"]
    begin, parts, results = time.perf_counter(), [], {}
    for name, gpu_s, tiny_s in STEPS:
        limit = tiny_s if opts.tiny else gpu_s
        if name not in chosen or limit is None:
            continue
        left = budget - (time.perf_counter() - begin)
        results[name] = run_step(name, opts, max(1.0, min(limit or left, left)))  # 0: the rest
        print(name, json.dumps(results[name], default=str)[:300], flush=True)
        if not name.startswith("seeds-"):
            parts.append(markdown(name, results[name]))
    parts.insert(len(parts) - ("natural-study" in results), seeds_table(results))
    header = (f"{where(opts.device)}; torch {torch.__version__}; "
              f"{'tiny models' if opts.tiny else 'full job'}; "
              f"{time.perf_counter() - begin:.0f} s in all.\n\n")  # fmt: skip
    section = opts.section or f"device-{'tiny-' if opts.tiny else ''}{opts.device}"
    write_section(opts.results, section, header + "\n".join(parts))
    print(f"recorded in {opts.results} (section {section})")


if __name__ == "__main__":
    main()
