"""[A]'s emergence law on [A]'s kind of data, with seeds and t-intervals (issues 15 and 24).

Cells (``--list``), each one ``ihprobe.train`` run per seed under ``runs/validate-papers/law``:

* ``sn-B{B}-C{C}``: semi-natural rows (bigrams of the embedded corpus, 300-id BPE) with
  repetition = reliability = 0.9 ([A] experiment 2), B in 8/16/32, C in 32/64/128.
* ``fx-B8-C{C}``: a context grid where C does not change the repetition: ``repeats`` over
  natural text, period 8..16 tokens, the repeated tail starting 32..48 tokens before the row's end
  (27 copied tokens per row at every C; a longer row only adds text in front, where fixing the start
  would add copies, the toy law's confound (``lab/studies/toy_law``)). B = 8, C in 64/128/256, so
  only c
  is fitted (b = 0); every fx cell trains ``FIXED_BUDGET`` updates (equal if C does not matter).
* ``size-d128``, ``size-L3``: width 128 and depth 3 at (B, C) = (8, 64); with ``sn-B8-C64``
  (width 64, depth 2) they test [A]'s model-size independence.
* ``sched-cosine``: ``sn-B8-C64`` with a cosine schedule instead of the constant one.

Experiments that ask where the exponents come from (issue 24; :data:`EXPERIMENTS`, defined with
their commands, run with ``--cell``):

* ``bs-B64-C64``, ``bs-B128-C64``: larger batches at C = 64 (4,400 updates each, the B = 32
  cell's budget): does log U bend from slope -1 toward [A]'s -0.37?
* ``lr{1e-3,3e-4}-B{8,32}-C64``: the learning rate, at 3x the base cell's budget (lr 1e-3 came
  out near lr 3e-3's updates): does b (from B = 8 vs 32) depend on it? ([A]: lr 2.5e-4.)
* ``wu-B{8,32}-C{32,128}``: the four corner cells with the warm-up fixed in tokens
  (``WARMUP_TOKENS`` in every cell, as [A] fixes 10M tokens) instead of 1% of the updates, at
  the budget of the ``sn`` cell's reported runs (at C = 128 its ``--extend-censored`` reruns').
* ``nr-B8-C{32,64,128,256}``: semi-natural rows whose p_a at each C makes the realised repeat
  share of their second half equal that of C-token windows of the embedded corpus (300-id BPE;
  :func:`natural_repetition`), instead of 0.9 at every C.
* ``iid-B16-C64``: the control of [A]'s "no induction heads on i.i.d. tokens": ``sn-B16-C64``'s
  model, optimiser and budget on i.i.d. Zipf tokens over 300 ids, where copying never helps;
  judged by each run's highest max PS, with a check of its peak (``papers_law_control``).

Budgets: ``BUDGET_AT_REFERENCE`` updates scaled by (16 * 128 / (B C))^0.9 (4,400 at B = 16, C = 128;
28,600 at B = 8, C = 32), about 1.8x the pilots' emergence points (B = 4 pilots, whose budgets
scaled by (B C)^-0.5 censored them, are why the grid starts at B = 8); C = 128 cells get twice that.
A run that ended inside its rise (``EmergencePoint.at_edge``) is censored. ``--extend-censored``
reruns every seed of a cell with a censored seed at twice the budget (into ``seedS-x2``); once all
are done they replace the cell's runs. The whole cell: a rerun is a fresh run (warm-up and
checkpoints change with the budget), and redrawing only late seeds biases it. ``--steps N``: every
cell N updates. A finished run whose folder is gone (``runs/`` is not committed) is read from
``RESULTS_papers_law.csv`` (a rerun of a cell still being rerun: ``RESULTS_papers_law_reruns.csv``).

Every run: GPT-NeoX, 4 heads, AdamW lr 3e-3, 1% warm-up then constant (unless the cell says
otherwise), grad clip 1, log-spaced checkpoints; seeds 0-4. Emergence: the start of the steep
segment of a 3-segment fit of max PS against log tokens (``run_emergence``). Statistics and
verdicts: ``ihprobe/dynamics/verdicts.py``, shared by every validation script. T, b and c are fitted
on the cells' mean log10 U (t on df = cells - parameters) and by a Tobit fit over every run in which
a censored run counts as "at least" its censored start or budget (clustered by cell); the Tobit fit
judges a grid with a censored run. ``--report --from-csv``: the tables from the CSV alone.

Run from the repository root (a killed run resumes; finished cells are reused)::

    nice -n 19 .venv/bin/python -m lab.studies law --list
    nice -n 19 .venv/bin/python -m lab.studies law --cell sn-B16-C128 --seed 0
    nice -n 19 .venv/bin/python -m lab.studies law            # everything
    nice -n 19 .venv/bin/python -m lab.studies law --extend-censored
    nice -n 19 .venv/bin/python -m lab.studies law --report   # tables only
    nice -n 19 .venv/bin/python -m lab.studies law --report --from-csv
    nice -n 19 .venv/bin/python -m lab.studies law --halves  # papers_law_halves
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pandas as pd

from ihprobe import TrainConfig
from ihprobe.jobs.grid import (
    read_result,
    report_lock,
    results_pair,
    saved_results,
    status_row,
    train_or_reuse,
    write_result,
)
from lab.studies.cli import OneLineParser, positive_int
from lab.studies.law import control, halves, other
from lab.studies.law.cells import (
    CONTEXTS,
    EXTEND,
    LR,
    SEEDS,
    SIZE_AT,
    budget,
    cells,
)
from lab.studies.law.measure import control_fields, emergence_fields
from lab.studies.law.regime import natural_repetition, regime_lines
from lab.studies.law.report import report_lines
from lab.studies.study import ROOT, header

HERE = Path(__file__).resolve().parent
OUT_MD, OUT_CSV = HERE / "RESULTS_papers_law.md", HERE / "RESULTS_papers_law.csv"
RERUNS_CSV = HERE / "RESULTS_papers_law_reruns.csv"  # reruns of cells not yet shown from them
DEFAULT_OUT = ROOT / "runs" / "validate-papers" / "law"


def run_dir(out: str, name: str, seed: int, factor: int = 1) -> Path:
    """``OUT/CELL/seedS``, or ``seedS-xF`` for its rerun with F times the cell's budget."""
    return Path(out) / name / (f"seed{seed}" if factor == 1 else f"seed{seed}-x{factor}")


def producer_options(cell: dict) -> dict:
    """The cell's options, natural text's repetition at its C where it asks for it."""
    options = dict(cell["options"])
    if options.get("repetition") == "natural":
        options["repetition"] = natural_repetition(cell["C"])
    return options


def config_of(name: str, cell: dict, seed: int, args, factor: int = 1) -> TrainConfig:
    steps = args.steps or cell.get("steps") or budget(cell["B"], cell["C"])
    return TrainConfig(
        out=str(run_dir(args.out, name, seed, factor)),
        producer=cell["producer"],
        producer_options=producer_options(cell),
        layers=cell.get("layers", args.layers),
        heads=4,
        d_model=cell.get("d_model", args.d_model),
        context=cell["C"],
        batch_size=cell["B"],
        steps=steps * factor,
        lr=cell.get("lr", LR),
        warmup=cell["warmup"] / factor if "warmup" in cell else 0.01,
        schedule=cell.get("schedule", "constant"),
        seed=seed,
        n_checkpoints=args.checkpoints,
        state_every=args.state_every,
        progress=False,
    )


def run_cell(name: str, cell: dict, seed: int, args, factor: int = 1) -> dict:
    """Train (or resume, or reuse) one cell's seed and find its emergence point; ``factor``
    times the cell's budget for a rerun (``--extend-censored``)."""
    config = config_of(name, cell, seed, args, factor)
    if not read_result(Path(config.out)) and (row := recorded(args.out, name, seed, factor)):
        print(f"{name} seed {seed}: reused (in the results CSV; its folder is gone)", flush=True)
        return row
    run, seconds, how = train_or_reuse(config)
    done = read_result(run)
    unchecked = cell["grid"] == "control" and done is not None and "peak_fiv" not in done
    if done is not None and how == "reused" and not unchecked:
        print(f"{name} seed {seed}: reused (finished earlier)", flush=True)
        return done
    started = time.perf_counter()
    point, measured = emergence_fields(run)
    previous = done or {}
    result = {
        "cell": name,
        "seed": seed,
        "grid": cell["grid"],
        "B": cell["B"],
        "C": cell["C"],
        "d_model": config.d_model,
        "layers": config.layers,
        "schedule": config.schedule,
        "lr": config.lr,
        "warmup": config.warmup,
        "steps": config.total_steps,
        **measured,
        "train_s": previous.get("train_s", 0.0) + seconds,
        "probe_s": time.perf_counter() - started,
        "how": previous.get("how", how) if how == "reused" else how,
        "budget_factor": factor,
    }
    if cell["grid"] == "control":
        result.update(control_fields(run, point, cell, run_dir(args.out, control.BASE, seed)))
    write_result(run, result)
    print(f"{name} seed {seed}: {how}, {result}", flush=True)
    return result


def results_files(out: str) -> tuple[Path, Path]:
    """``RESULTS_papers_law.md`` and ``.csv`` of the run folder ``out`` (``results_pair``)."""
    return results_pair(OUT_MD, OUT_CSV, out, DEFAULT_OUT)


def saved_rows(out: str) -> dict[tuple, dict]:
    """The results CSV's done rows (of the default run folder; another --out starts empty)."""
    return saved_results(OUT_CSV) if Path(out) == DEFAULT_OUT else {}


def recorded(out: str, name: str, seed: int, factor: int = 1) -> dict | None:
    """A finished run whose folder is gone, as the results CSVs of the default run folder keep
    it: a first run or shown rerun in ``RESULTS_papers_law.csv``, other reruns in ``RERUNS_CSV``."""
    row = saved_rows(out).get((name, seed))
    if row is not None and row.get("budget_factor", 1) == factor:
        return row
    reruns = saved_results(RERUNS_CSV) if factor > 1 and Path(out) == DEFAULT_OUT else {}
    return reruns.get((name, seed))


def result_of(out: str, name: str, seed: int, factor: int = 1) -> dict | None:
    """A finished run's result: its folder's, else its record (:func:`recorded`)."""
    return read_result(run_dir(out, name, seed, factor)) or recorded(out, name, seed, factor)


def extended(out: str, name: str) -> bool:
    """A cell is shown from its reruns once every seed with a first run has one (in its run
    folders, or in the results CSV where the folders are gone)."""
    saved = {seed: r for (cell, seed), r in saved_rows(out).items() if cell == name}
    if any(r.get("budget_factor", 1) == EXTEND for r in saved.values()):
        return True
    first = [s for s in SEEDS if read_result(run_dir(out, name, s)) or s in saved]
    return bool(first) and all(result_of(out, name, s, EXTEND) for s in first)


def first_run(result: dict | None) -> str | None:
    """A first run's emergence as the rerun note shows it (``>=`` for a censored start)."""
    if not result:
        return None
    if not result.get("transition"):
        return f"none by {int(result.get('steps', 0)):,}"
    return f"{'>= ' if result.get('censored') else ''}{result['updates']:,.0f}"


def first_run_note(out: str, name: str, seed: int, saved: dict[tuple, dict]) -> str | None:
    """A seed's first run as its rerun note shows it: from its folder, else its CSV row (which
    carries the note itself once the cell shows its reruns)."""
    folder, row = read_result(run_dir(out, name, seed)), saved.get((name, seed)) or {}
    if folder or row.get("budget_factor", 1) == 1:
        return first_run(folder or row)
    return row.get("first_run")


def collect(args) -> pd.DataFrame:
    """One row per cell and seed, status done / pending: a run folder's result, else the done
    row of ``RESULTS_papers_law.csv`` (``args.from_csv``: the CSV alone)."""
    from_csv = getattr(args, "from_csv", False)
    saved = saved_results(results_files(args.out)[1]) if from_csv else saved_rows(args.out)
    rows = []
    for name, cell in cells().items():
        factor = EXTEND if not from_csv and extended(args.out, name) else 1
        for seed in SEEDS:
            shape = {"cell": name, "seed": seed, **{k: cell[k] for k in ("grid", "B", "C")}}
            result = None if from_csv else result_of(args.out, name, seed, factor)
            if result and factor > 1:
                result["first_run"] = first_run_note(args.out, name, seed, saved)
            result = result or saved.get((name, seed))
            rows.append(status_row(shape, result))
    return tidy(pd.DataFrame(rows))


def tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column the report reads, present while nothing is done."""
    for flag in ("transition", "censored"):
        frame[flag] = frame.get(flag, pd.Series(False, index=frame.index)).fillna(False)
        frame[flag] = frame[flag].astype(bool)
    for column in ("steps", "updates", "train_s", "probe_s", "first_run", "max_ps"):
        frame[column] = frame.get(column, pd.Series(None, index=frame.index, dtype=object))
    frame["budget_factor"] = frame.get("budget_factor", pd.Series(1, index=frame.index)).fillna(1)
    return frame


def censored_cells(args) -> list[str]:
    """Cells with a seed censored at its own budget (its steep segment reaches the budget, or it
    has none; not the control, meant to have none): ``--extend-censored`` reruns them."""
    frame = collect(args)
    open_ended = frame.censored | ((frame.status == "done") & ~frame.transition)
    first = frame[(frame.budget_factor == 1) & open_ended & (frame.grid != "control")]
    return sorted(set(first.cell))


TITLE = "[A]'s emergence law on semi-natural data, with seeds (issues 15 and 24)"


def report(args) -> None:
    out_md, out_csv = results_files(args.out)
    with report_lock(out_csv):
        frame = collect(args)
        frame.to_csv(out_csv, index=False)
        open_cells = [n for n in cells() if not extended(args.out, n)]
        reruns = [
            {**r, "cell": n, "seed": s, "status": "done"}
            for n in open_cells
            for s in SEEDS
            if (r := result_of(args.out, n, s, EXTEND))
        ]
        if not getattr(args, "from_csv", False):  # every finished one: a kill keeps it
            kept = out_csv.with_name(RERUNS_CSV.name)
            if reruns:
                pd.DataFrame(reruns).to_csv(kept, index=False)
            else:
                kept.unlink(missing_ok=True)
        write_report(frame, args, out_md)


def write_report(frame: pd.DataFrame, args, out_md: Path) -> None:
    rerender = getattr(args, "report", False)  # --report: the recorded provenance stays
    lines = [
        *header("law", TITLE, "--cell CELL --seed SEED", frame, out_md, rerender),
        "Settings: GPT-NeoX, 4 heads, d_model 64 and 2 layers unless the cell says otherwise; "
        f"AdamW lr {LR:g}, 1% warm-up then constant (sched-cosine: cosine to 0; the issue-24 "
        "cells say their own), grad clip 1; updates per run as in the table (the cell's budget, "
        f"see the docstring), {args.checkpoints} log-spaced checkpoints; seeds "
        f"{', '.join(map(str, SEEDS))}. Data and grids: see the docstring of "
        "`lab/studies/law/run.py`. Emergence = start of the steep segment of a "
        "3-segment fit of max prefix matching vs log tokens (probe n = 16, 50 rows).",
        "",
        *regime_lines(CONTEXTS, LR),
        *report_lines(frame, EXTEND, SIZE_AT),
        *halves.section_lines(control.induction_rows(halves.read()), frame),
    ]
    out_md.write_text("\n".join(lines))
    print(f"wrote {out_md} and {out_md.with_suffix('.csv').name}")
    if out_md == OUT_MD:  # the committed results: the run sets outside the grid too
        out_md.with_name(other.MD).write_text(other.render(HERE))


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m lab.studies law", description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", help="run only this cell (repeatable)")
    parser.add_argument("--seed", type=int, action="append", help="run only this seed")
    parser.add_argument("--list", action="store_true", help="list the cells and their status")
    parser.add_argument("--report", action="store_true", help="only rewrite the results files")
    parser.add_argument(
        "--from-csv", action="store_true", help="with --report: rebuild from the results CSV"
    )
    parser.add_argument(
        "--extend-censored",
        action="store_true",
        help=f"rerun every seed of each "
        f"cell with a censored seed with {EXTEND}x its budget; once all are done "
        "they replace the cell's runs",
    )
    parser.add_argument(
        "--halves",
        action="store_true",
        help="refit finished run folders on "
        "interleaved halves and with n = C/2 probes, then the report",
    )
    parser.add_argument(
        "--steps", type=positive_int, help="updates per run (default: the cell's budget)"
    )
    parser.add_argument(
        "--checkpoints", type=positive_int, default=40, help="log-spaced (1.3x apart)"
    )
    parser.add_argument("--d-model", type=positive_int, default=64)
    parser.add_argument("--layers", type=positive_int, default=2)
    parser.add_argument(
        "--state-every", type=positive_int, default=100, help="updates between states"
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    table = cells()
    unknown = sorted(set(args.cell or ()) - set(table))
    if unknown:
        parser.exit(2, f"unknown cell(s) {unknown}: see --list.\n")
    if args.from_csv and not args.report:
        parser.exit(2, "--from-csv only rebuilds the tables: pass it with --report.\n")
    if args.list:
        print(collect(args)[["cell", "seed", "grid", "B", "C", "status"]].to_string(index=False))
        return
    if args.halves:
        where = functools.partial(run_dir, args.out)
        induction = {name: cell for name, cell in table.items() if cell["grid"] != "control"}
        halves.update(halves.finished_runs(induction, SEEDS, (1, EXTEND), where))
    elif args.extend_censored:
        for name in censored_cells(args):
            for seed in args.seed or SEEDS:
                if not args.cell or name in args.cell:
                    run_cell(name, table[name], seed, args, factor=EXTEND)
    elif not args.report:
        for name in args.cell or table:
            factor = EXTEND if extended(args.out, name) else 1
            for seed in args.seed or SEEDS:
                run_cell(name, table[name], seed, args, factor)
    report(args)


if __name__ == "__main__":
    main()
