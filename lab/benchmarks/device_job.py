"""The prepared device job: the speed ratios on an idle device, then the natural-text study's
GPU queue beside every public function checked on the device against the CPU, each step under
its own time limit.

    python lab/benchmarks/device_job.py                      # a lent GPU: --device cuda, 8 minutes
    python lab/benchmarks/device_job.py --device cpu --tiny  # the CPU mode the test suite runs

Steps, in order (``STEPS``; each runs in its own process with its own limit, so a failure or
a timeout is one row of the results, never the end of the job; what each runs:
``device_steps.py``):

1. ``speed-scale``: ``bench_scale.py`` (scan and ablate against the bare forward, bfloat16,
   at 160m, 410m and 1.4b);
2. ``speed-train``: ``bench_train.py`` (ihprobe train against a bare loop and HF Trainer);
3. ``seeds-K`` (``device_seeds.py``): the aggregate tokens/s of K runs sharing the device,
   one step per K at K = 1, 8, 16 (``--tiny``: 1, 2);
4. ``speed-fastpath`` and ``speed-series`` (a GPU only; the CPU's are committed), and
   ``offload`` (``device_offload.py``: scan and ablate placed by ``device_map="auto"`` over
   the GPUs, the GPU and the CPU, or the CPU and the disk, against one device);
   ``bench_fastpath.py`` (the pair scan's memory and time against the pattern scan's, 160m and
   410m at 2,048 and 8,192 tokens) and ``bench_series.py`` (a suite with and without
   prefetching), each writing its ``cuda`` section of its own results file; ``fv``
   (``device_fv.py``: ``bench_fv.py``'s comparison of ``fv_scores`` with the per-head loop);
5. ``natural-study``: the command in ``$IHPROBE_NATURAL_GPU`` (the natural-text study's GPU
   queue, resumable: it skips what it finished; unset here, a no-op row, while
   ``gpu_check.sh`` sets the queue by default). It starts once every timed step is done and
   runs in the background until the budget is spent, beside the steps after it, which time
   nothing;
6. ``correct-natural``, ``correct-160m``, ``correct-train`` (``device_checks.py``): every
   public function on the device against the CPU on ``reference/natural-docs`` and on a random
   model of Pythia-160m's configuration (``--tiny``: a tiny one), float32 and bfloat16; train
   with live probes, resumed and extended, its trajectory, and the demo with ``device="auto"``.

It writes its tables, with the device named, into ``lab/benchmarks/RESULTS_device.md``
(``--results`` elsewhere). The machine needs torch and transformers; the README's "On a GPU"
section names the wheels to carry for the rest.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pandas as pd
import torch

from ihprobe.jobs.grid import markdown as table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "RESULTS_device.md"
NATURAL_GPU = "IHPROBE_NATURAL_GPU"  # the natural-text study's GPU step (a shell command)
NATURAL_LOG = Path(tempfile.gettempdir()) / "ihprobe-natural-study.log"  # what it printed
# (name, seconds on a GPU, seconds in --tiny); None: not in that mode; 0: until the budget
# is spent (in the background, beside the steps after it). The GPU limits were raised after the
# first lent H200 ran past the earlier ones (RESULTS_device.md), from the CPU side's times on
# this project's machine (correct-natural: 57 s); together they exceed one 8-minute budget, so
# a short lease chooses with --steps
STEPS = (
    ("speed-scale", 150, 120),
    ("speed-train", 100, 90),
    ("seeds-1", 60, 60),
    ("seeds-2", None, 90),
    ("seeds-8", 40, None),
    ("seeds-16", 50, None),
    ("speed-fastpath", 150, None),  # the pair scan against the pattern scan (memory, time)
    ("speed-series", 180, None),  # a 20-checkpoint suite with and without prefetching
    ("offload", 150, 120),  # device_map="auto" against one device (device_offload.py)
    ("fv", 120, 90),  # fv_scores' fast path against the per-head loop (device_fv.py)
    ("natural-study", 0, 0),  # from here on nothing is timed: the queue shares the device
    ("correct-natural", 120, 90),  # each check computes everything on the CPU too
    ("correct-160m", 240, 60),
    ("correct-train", 150, 120),
)
BACKGROUND = "natural-study"
GRACE = 10  # seconds past its limit for a step to write its result before it is killed
BUDGET = {"gpu": 480, "tiny": 720}  # seconds of the whole job (--budget)


def seeds_table(results: dict[str, dict]) -> str:
    """The K-seed steps as one table, each K against one process (K = 1)."""
    rows = [
        r for name, res in results.items() if name.startswith("seeds-") for r in res.get("rows", [])
    ]
    one = next((r["tokens/s (sum in loop)"] for r in rows if r["K"] == 1), None)
    for r in rows:
        r["x one process"] = round(r["tokens/s (sum in loop)"] / one, 2) if one else None
    failed = [
        f"{n}: {r['error']}" for n, r in results.items() if n.startswith("seeds-") and "error" in r
    ]
    text = markdown("speed-seeds", {"rows": rows, "seconds": "-"}) if rows else ""
    return text + "".join(f"\nfailed: {f}\n" for f in failed)


def run_group(argv: list[str], limit: float) -> tuple[int | None, str, str]:
    """(exit status, stdout, stderr) of ``argv`` run in a process group of its own; past
    ``limit`` seconds the whole group is killed (the runs a step started go with it) and the
    status is None."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    return wait_group(proc, limit)


def wait_group(proc: subprocess.Popen, limit: float) -> tuple[int | None, str, str]:
    """``run_group``'s wait: the process's group is killed past ``limit`` seconds."""
    try:
        out, err = proc.communicate(timeout=limit)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def run_step(name: str, opts, limit: float) -> dict:
    """One step in a child process under ``limit`` seconds; a failure is what it says."""
    return finish_step(start_step(name, opts, limit))


def start_step(name: str, opts, limit: float) -> dict:
    """Start one step's child process in a process group of its own (see ``finish_step``)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    argv = [
        sys.executable,
        __file__,
        "--step",
        name,
        "--device",
        opts.device,
        "--limit",
        str(limit),
        "--step-out",
        str(out),
        *(["--tiny"] if opts.tiny else []),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    return {"proc": proc, "out": out, "limit": limit, "begin": time.perf_counter()}


def finish_step(started: dict) -> dict:
    """Wait for a started step until its limit (plus ``GRACE`` to write its result); past it the
    whole group is killed. Its result, or what went wrong, with its seconds."""
    proc, out, limit = started["proc"], started["out"], started["limit"]
    left = limit + GRACE - (time.perf_counter() - started["begin"])
    code, _, err = wait_group(proc, max(1.0, left))
    if code is None:
        so_far = _read(out).get("rows")
        said = "; the rows above are those it finished" if so_far else ""
        result = {
            "error": f"timed out after {limit:.0f} s{said}",
            **({"rows": so_far} if so_far else {}),
        }
    else:
        result = _read(out)
        if code or not result:
            tail = err.strip().splitlines()[-1:] or ["no output"]
            result = {"error": f"exit {code}: {tail[0][:200]}"}
    result["seconds"] = round(time.perf_counter() - started["begin"], 1)
    out.unlink(missing_ok=True)
    return result


class SavedRows(list):
    """A step's rows, written to ``path`` (atomically) as each is appended."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def append(self, item) -> None:
        super().append(item)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps({"rows": list(self)}, default=float))
        partial.replace(self.path)


def _read(path: Path) -> dict:
    """A step's result file: {} where it is missing, empty or cut short."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def markdown(name: str, result: dict) -> str:
    text = f"### {name} ({result['seconds']} s)\n\n"
    if "rows" in result:  # columns in the order the rows first name them
        text += "\n".join(table(pd.DataFrame(result["rows"]).map(_cell))) + "\n"
    if "text" in result:
        text += result["text"] + "\n"
    if "error" in result:
        text += f"{chr(10) if 'rows' in result else ''}failed: {result['error']}\n"
    return text


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line and exit status 2, as ``ihprobe`` answers; never a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def seconds(text: str) -> float:
    """``--budget``: a finite number of seconds above 0 (``nan``, ``inf`` and ``-5`` refused)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def limits(text: str, parser: argparse.ArgumentParser) -> dict[str, float]:
    """``--limits``: step=seconds pairs, a step of ``STEPS`` and finite seconds >= 0 each."""
    names, found = {name for name, _, _ in STEPS}, {}
    for pair in filter(None, text.split(",")):
        name, _, given = pair.partition("=")
        try:
            found[name] = float(given)
        except ValueError:
            parser.error(f"--limits {pair!r}: write step=seconds, e.g. seeds-1=60")
        if name not in names:
            parser.error(f"--limits {pair!r}: the steps are {', '.join(sorted(names))}")
        if not math.isfinite(found[name]) or found[name] < 0:
            parser.error(f"--limits {pair!r}: the seconds must be a finite number, 0 or more")
    return found


def chosen_steps(text: str | None, tiny: bool, parser: argparse.ArgumentParser) -> list[str]:
    """``--steps``: names of ``STEPS`` that run in this mode (else one line, before any work)."""
    runs = [name for name, gpu_s, tiny_s in STEPS if (tiny_s if tiny else gpu_s) is not None]
    names = [name for name in (text or "").split(",") if name] if text is not None else runs
    unknown = [name for name in names if name not in runs]
    if unknown or not names:
        mode = "with --tiny" if tiny else "on a device"
        parser.error(
            f"--steps {text!r}: {', '.join(unknown) or 'no step'} does not run {mode}; "
            f"the steps are {', '.join(runs)}"
        )
    return names


def device_problem(device: str) -> str | None:
    """Why ``--device`` names no device here, else None (every step would fail on it)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        return f"--device {device!r} is not a device; use cpu, cuda or cuda:N"
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        return f"--device {device!r}: this machine has {torch.cuda.device_count()} CUDA devices"
    if dev.type not in ("cpu", "cuda"):
        return f"--device {device!r}: the job runs on cpu or cuda"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="device_job.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small models: the CPU mode")
    parser.add_argument("--steps", help="comma-separated subset of the steps (default: all)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--section", help="section of the results file (default: the device)")
    parser.add_argument(
        "--budget",
        type=seconds,
        help="seconds of the whole job (default: "
        f"{BUDGET['gpu']} on a device, {BUDGET['tiny']} with --tiny)",
    )
    parser.add_argument(
        "--limits",
        default="",
        help="per-step seconds that replace STEPS', e.g. seeds-1=60,correct-160m=200",
    )
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--step-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=60, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    chosen = chosen_steps(opts.steps, opts.tiny, parser) if not opts.step else []
    overrides = limits(opts.limits, parser)
    section = opts.section or f"device-{'tiny-' if opts.tiny else ''}{opts.device}"
    if not opts.step:  # every check of what it writes where, before the first step runs
        from sections import section_problem

        problem = device_problem(opts.device) or section_problem(opts.results, section)
        if problem:
            parser.error(problem)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if opts.step:  # the child: one step, its JSON to --step-out
        try:
            from device_steps import step  # lab/benchmarks/: the script's folder

            result = step(opts.step, opts.device, opts.tiny, opts.limit, opts.step_out)
        except Exception as err:  # noqa: BLE001 - the parent records it as the step's row
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"[:300]}
        opts.step_out.write_text(json.dumps(result, default=float))
        return
    from sections import where, write_section

    budget = opts.budget or BUDGET["tiny" if opts.tiny else "gpu"]
    begin, results, background = time.perf_counter(), {}, None
    for name, gpu_s, tiny_s in STEPS:
        limit = tiny_s if opts.tiny else gpu_s
        limit = float(overrides[name]) if name in overrides else limit  # 0: the rest
        if name not in chosen or limit is None:
            continue
        left = max(1.0, budget - (time.perf_counter() - begin))
        if name == BACKGROUND:  # until the budget is spent, beside the steps after it
            background = start_step(name, opts, left)
            continue
        results[name] = run_step(name, opts, min(limit or left, left))
        print(name, json.dumps(results[name], default=str)[:300], flush=True)
    if background is not None:
        results[BACKGROUND] = finish_step(background)
        print(BACKGROUND, json.dumps(results[BACKGROUND], default=str)[:300], flush=True)
    parts = [
        markdown(name, results[name])
        for name, _, _ in STEPS
        if name in results and not name.startswith("seeds-")
    ]
    timed = sum(name in results for name in ("speed-scale", "speed-train"))
    parts.insert(timed, seeds_table(results))
    header = (
        f"{where(opts.device)}; torch {torch.__version__}; "
        f"{'tiny models' if opts.tiny else 'full job'}; "
        f"{time.perf_counter() - begin:.0f} s in all.\n\n"
    )
    write_section(opts.results, section, header + "\n".join(parts))
    print(f"recorded in {opts.results} (section {section})")


if __name__ == "__main__":
    main()
