"""[A]'s emergence law on [A]'s kind of data, with seeds and bootstrap intervals (issue 15).

Cells (``--list``), each one ``ihprobe.train`` run per seed under ``runs/validate-papers/law``:

* ``sn-B{B}-C{C}``: semi-natural rows (bigrams of the embedded corpus, 300-id BPE) with
  repetition = reliability = 0.9 ([A] experiment 2), B in 8/16/32, C in 32/64/128.
* ``fx-B8-C{C}``: a context grid where the context does not change the repetition structure:
  ``repeats`` over natural text, period 8..16 tokens and a repeated tail that starts 32..48
  tokens before the end of the row, both in absolute tokens, B = 8, C in 64/128/256. Every row
  then holds the same kind and amount of repetition (27 copied tokens per row on average at
  both C = 64 and C = 256, 2-6 periods) whatever C is; a longer context only adds
  non-repeating text in front. (Fixing the start instead would let a longer row add more
  copies, the confound of ``validate_law.py``.) One B, so only c is fitted here (b = 0: T
  absorbs B^b). Every fx cell trains for ``FIXED_BUDGET`` updates: if C does not matter here,
  all three emerge at about the same update (a pilot at C = 128, seed 0, was rising from max
  PS 0.02 at 2,900 updates to 0.18 at 6,000), and a budget shrinking with C would censor the
  longest context.
* ``size-d128``, ``size-L3``: width 128 and depth 3 at (B, C) = (8, 64); with ``sn-B8-C64``
  (width 64, depth 2) they test [A]'s model-size independence.
* ``sched-cosine``: ``sn-B8-C64`` with a cosine schedule instead of the constant one.

Budgets: each cell trains for ``BUDGET_AT_REFERENCE`` updates scaled by
(16 * 128 / (B C))^0.9 (4,400 updates at B = 16, C = 128; 28,600 at B = 8, C = 32), about 1.8
times the emergence point of pilots: near 2,400 updates at B = 16, C = 128, and 18,000-28,000
at B = 4 (C = 64 and 32), where budgets scaled by (B C)^-0.5 or ^-0.65 censored it or saw no
transition; those B = 4 pilots are why the grid starts at B = 8. C = 128 cells get twice
that: at B = 8 the first seed saw no transition in 8,200 updates (8.4M tokens, max PS 0.05
throughout), while C = 32 and 64 had placed theirs by 3-4M tokens. The budget is the same
for every seed of a cell, and a run whose steep segment reaches its last checkpoint is reported
as censored, never fitted. ``--extend-censored`` reruns every seed of a cell that has a
censored seed with twice the budget (into ``seedS-x2``); once all its seeds are done the reruns
replace the cell's runs in the tables and fits. The whole cell, not only its censored seed:
a rerun is a fresh run (the 1% warm-up and the checkpoint spacing change with the budget, so
its trajectory is not the censored one continued), and redrawing only the late seeds would
bias the cell towards early emergence. ``--steps N`` gives every cell N updates instead
(smoke runs).

Every run: GPT-NeoX, 4 heads, AdamW lr 3e-3, 1% warm-up then constant (unless the cell says
cosine), grad clip 1, log-spaced checkpoints. The emergence point is the
start of the steep segment of a 3-segment fit of max prefix matching against log tokens
(``ihprobe.dynamics.changepoint.run_emergence``). T, b and c are refitted (``ihprobe.fit_law``)
over all
seeds of a grid, leaving out censored runs; 95% intervals come from resampling seeds within
cells. A fit is reported only when every cell of its grid has all its seeds done; otherwise it
is marked pending.

Run from the repository root (a killed run resumes; finished cells are reused)::

    nice -n 19 .venv/bin/python benchmarks/validate_papers_law.py --list
    nice -n 19 .venv/bin/python benchmarks/validate_papers_law.py --cell sn-B16-C128 --seed 0
    nice -n 19 .venv/bin/python benchmarks/validate_papers_law.py            # everything
    nice -n 19 .venv/bin/python benchmarks/validate_papers_law.py --extend-censored
    nice -n 19 .venv/bin/python benchmarks/validate_papers_law.py --report   # tables only
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from validate_papers_common import (
    ROOT,
    bootstrap_mean,
    interval,
    log_ratio,
    markdown,
    read_result,
    report_header,
    status_row,
    train_or_reuse,
    verdict_same,
    verdict_value,
    write_result,
)

from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import run_emergence
from ihprobe.dynamics.law import LAWS, fit_law
from ihprobe.training.trainer import TrainConfig

BATCHES, CONTEXTS, SEEDS = (8, 16, 32), (32, 64, 128), (0, 1, 2)
FIXED_B, FIXED_CONTEXTS, FIXED_BUDGET = 8, (64, 128, 256), 12000
SIZE_AT = (8, 64)
EXTEND = 2  # --extend-censored reruns a cell with a censored seed at this many times its budget
BUDGET_AT_REFERENCE = (16, 128, 4400)  # (B, C, updates); other cells scale by (B C)^-0.9
SEMI_NATURAL = {"repetition": 0.9, "reliability": 0.9, "vocab_size": 300}
HERE = Path(__file__).resolve().parent
OUT_MD, OUT_CSV = HERE / "RESULTS_papers_law.md", HERE / "RESULTS_papers_law.csv"


def fixed_structure(context: int) -> dict:
    """Repeats whose period and tail length are absolute, so C only adds text in front."""
    return {"period": [8, 16], "start": [context - 48, context - 32], "vocab_size": 300}


def budget(B: int, C: int) -> int:
    """Updates for a cell: the reference budget scaled by (B C)^-0.9, in hundreds, twice that
    at C = 128.

    >>> budget(16, 128), budget(8, 32)
    (8800, 28600)
    """
    B0, C0, updates = BUDGET_AT_REFERENCE
    scaled = int(round(updates * (B0 * C0 / (B * C)) ** 0.9 / 100) * 100)
    return scaled * (2 if C == 128 else 1)


def cells() -> dict[str, dict]:
    """Cell name -> its grid, producer, options and shape."""
    out = {}
    for B in BATCHES:
        for C in CONTEXTS:
            out[f"sn-B{B}-C{C}"] = {"grid": "semi-natural", "producer": "semi-natural",
                                    "options": SEMI_NATURAL, "B": B, "C": C}  # fmt: skip
    for C in FIXED_CONTEXTS:
        out[f"fx-B{FIXED_B}-C{C}"] = {"grid": "fixed-structure", "producer": "repeats",
                                      "options": fixed_structure(C), "B": FIXED_B,
                                      "C": C, "steps": FIXED_BUDGET}  # fmt: skip
    base = {"producer": "semi-natural", "options": SEMI_NATURAL, "B": SIZE_AT[0], "C": SIZE_AT[1]}
    out["size-d128"] = {**base, "grid": "size", "d_model": 128}
    out["size-L3"] = {**base, "grid": "size", "layers": 3}
    out["sched-cosine"] = {**base, "grid": "schedule", "schedule": "cosine"}
    return out


def run_dir(out: str, name: str, seed: int, factor: int = 1) -> Path:
    """``OUT/CELL/seedS``, or ``seedS-xF`` for its rerun with F times the cell's budget."""
    return Path(out) / name / (f"seed{seed}" if factor == 1 else f"seed{seed}-x{factor}")


def config_of(name: str, cell: dict, seed: int, args, factor: int = 1) -> TrainConfig:
    steps = args.steps or cell.get("steps") or budget(cell["B"], cell["C"])
    return TrainConfig(
        out=str(run_dir(args.out, name, seed, factor)), producer=cell["producer"],
        producer_options=dict(cell["options"]), layers=cell.get("layers", args.layers),
        heads=4, d_model=cell.get("d_model", args.d_model), context=cell["C"],
        batch_size=cell["B"], steps=steps * factor,
        lr=3e-3, warmup=0.01,
        schedule=cell.get("schedule", "constant"), seed=seed,
        n_checkpoints=args.checkpoints, state_every=args.state_every, progress=False,
    )  # fmt: skip


def run_cell(name: str, cell: dict, seed: int, args, factor: int = 1) -> dict:
    """Train (or resume, or reuse) one cell's seed and find its emergence point; ``factor``
    times the cell's budget for a rerun (``--extend-censored``)."""
    config = config_of(name, cell, seed, args, factor)
    run, seconds, how = train_or_reuse(config)
    done = read_result(run)
    if done is not None and how == "reused":
        print(f"{name} seed {seed}: reused (finished earlier)", flush=True)
        return done
    started = time.perf_counter()
    point = run_emergence(run, n=16, batch=50, cache=run / "trajectory-cache")
    previous = done or {}
    result = {
        "cell": name, "seed": seed, "grid": cell["grid"], "B": cell["B"], "C": cell["C"],
        "d_model": config.d_model, "layers": config.layers, "schedule": config.schedule,
        "steps": config.total_steps, "transition": bool(point.transition),
        "updates": point.updates if point.transition else None,
        "updates_low": point.updates_low if point.transition else None,
        "updates_high": point.updates_high if point.transition else None,
        "threshold_step": point.threshold_step,
        # the steep segment reaches the last checkpoint: the point is at the budget's edge
        "censored": bool(point.transition and point.updates_high >= config.total_steps),
        "train_s": previous.get("train_s", 0.0) + seconds, "probe_s": time.perf_counter() - started,
        "how": how, "budget_factor": factor,
    }  # fmt: skip
    write_result(run, result)
    print(f"{name} seed {seed}: {how}, {result}", flush=True)
    return result


def collect(args) -> pd.DataFrame:
    """One row per cell and seed; status done / pending."""
    rows = []
    for name, cell in cells().items():
        results = [read_result(run_dir(args.out, name, seed)) for seed in SEEDS]
        reruns = [read_result(run_dir(args.out, name, seed, EXTEND)) for seed in SEEDS]
        if all(reruns):  # the whole cell again with the longer budget (--extend-censored)
            results = reruns
        for seed, result in zip(SEEDS, results, strict=True):
            shape = {"grid": cell["grid"], "B": cell["B"], "C": cell["C"]}
            rows.append(status_row({"cell": name, "seed": seed, **shape}, result))
    frame = pd.DataFrame(rows)
    for flag in ("transition", "censored"):  # absent while nothing is done
        frame[flag] = frame.get(flag, pd.Series(False, index=frame.index)).fillna(False)
    for column in ("steps", "updates", "train_s", "probe_s"):
        frame[column] = frame.get(column, pd.Series(np.nan, index=frame.index))
    frame["budget_factor"] = frame.get("budget_factor", pd.Series(1, index=frame.index)).fillna(1)
    return frame


def censored_cells(args) -> list[str]:
    """Cells with a censored seed at their own budget: ``--extend-censored`` reruns them."""
    frame = collect(args)
    first = frame[(frame.budget_factor == 1) & frame.censored.astype(bool)]
    return sorted(set(first.cell))


def placed(done: pd.DataFrame) -> pd.DataFrame:
    """Runs with a transition whose steep segment ends before the budget does."""
    return done[done.transition.astype(bool) & ~done.censored.astype(bool)]


def fit_grid(
    done: pd.DataFrame, b: float | None = None, resamples: int = 1000, censored: bool = False
) -> dict:
    """Refit with both forms; bootstrap intervals by resampling seeds within each cell.

    ``b`` fixes the batch exponent (a grid with one B); the sqrt form then fixes only c.
    ``censored`` also fits the start of the steep segment of censored runs (a sensitivity
    check: their transition began inside the budget, its end did not).
    """
    formed = done[done.transition.astype(bool)] if censored else placed(done)
    points = formed.rename(columns={"B": "batch_size", "C": "context"})
    free, sqrt = fit_law(points, b=b), fit_law(points, b=0.5 if b is None else b, c=0.5)
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(resamples):
        parts = [g.iloc[rng.integers(0, len(g), len(g))] for _, g in points.groupby("cell")]
        try:
            fit = fit_law(pd.concat(parts), b=b)
        except IhprobeError:
            continue
        draws.append((np.log10(fit.T), fit.b, fit.c))
    lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    rms = lambda r: float(np.sqrt(np.mean(np.square(r))))  # noqa: E731
    published = {k: rms(np.log10(points.updates) - np.log10(
        [LAWS[k].updates(b, c) for b, c in zip(points.batch_size, points.context, strict=True)]
    )) for k in LAWS}  # fmt: skip
    return {"n": len(points), "no_transition": len(done) - len(formed), "fit": free,
            "log10T_ci": (lo[0], hi[0]), "b_ci": (lo[1], hi[1]), "c_ci": (lo[2], hi[2]),
            "rms_free": rms(free.residuals), "rms_sqrt": rms(sqrt.residuals), "sqrt_T": sqrt.T,
            "rms_published": published}  # fmt: skip


def fit_lines(frame: pd.DataFrame, grid: str, b: float | None = None) -> list[str]:
    rows = frame[frame.grid == grid]
    if (rows.status != "done").any():
        n = int((rows.status == "done").sum())
        return [f"- **{grid}**: pending ({n} of {len(rows)} cell-seeds done); no fit reported "
                "until every cell has all its seeds."]  # fmt: skip
    try:
        f = fit_grid(rows, b=b)
    except IhprobeError as err:
        return [f"- **{grid}**: no fit: {err}"]
    t = f["fit"]
    b_part = (f"b [{f['b_ci'][0]:.2f}, {f['b_ci'][1]:.2f}], " if b is None
              else f"b fixed at {b:g} (one batch size), ")  # fmt: skip
    b_verdict = [] if b is not None else [("b", verdict_value(f["b_ci"], 0.37, widest=1.0))]
    said = b_verdict + [("c", verdict_value(f["c_ci"], 0.62, widest=1.0))]
    return [
        f"- **{grid}** ({f['n']} points, {f['no_transition']} without a transition or censored): "
        f"U = {t.T:,.0f} / (B^{t.b:.2f} C^{t.c:.2f}); 95% intervals (seeds resampled within "
        f"cells): log10 T [{f['log10T_ci'][0]:.2f}, {f['log10T_ci'][1]:.2f}], "
        f"{b_part}c [{f['c_ci'][0]:.2f}, {f['c_ci'][1]:.2f}]; "
        "[A]: b = 0.37, c = 0.62.",
        f"  - residual RMS (log10 U): fitted exponents {f['rms_free']:.3f}, sqrt form with T refit "
        f"(T = {f['sqrt_T']:,.0f}) {f['rms_sqrt']:.3f}; [A]'s published constants: "
        + ", ".join(f"{k} {v:.3f}" for k, v in f["rms_published"].items())
        + ".",
        "  - against [A]: " + "; ".join(f"{k} {v} ({why})" for k, (v, why) in said) + ".",
        *censored_line(rows, b),
    ]


def censored_line(rows: pd.DataFrame, b: float | None) -> list[str]:
    """The fit again with the censored runs' start points, when there are any."""
    n = int(rows.censored.astype(bool).sum())
    if not n:
        return []
    f = fit_grid(rows, b=b, censored=True)
    b_part = "" if b is not None else f"b [{f['b_ci'][0]:.2f}, {f['b_ci'][1]:.2f}], "
    return [f"  - sensitivity, with the {n} censored run(s)' start points included "
            f"({f['n']} points): b = {f['fit'].b:.2f}, c = {f['fit'].c:.2f}; 95% intervals "
            f"{b_part}c [{f['c_ci'][0]:.2f}, {f['c_ci'][1]:.2f}]."]  # fmt: skip


def compared_lines(frame: pd.DataFrame) -> list[str]:
    """Size and schedule cells against the base cell: the ratio of mean emergence updates."""
    base = f"sn-B{SIZE_AT[0]}-C{SIZE_AT[1]}"
    claims = {"size-d128": "[A]: the emergence point does not depend on model size (width 128)",
              "size-L3": "[A]: the emergence point does not depend on model size (3 layers)",
              "sched-cosine": "how far a cosine schedule moves the emergence point"}  # fmt: skip
    lines = []
    for cell, claim in claims.items():
        rows = frame[frame.cell.isin([cell, base])]
        if (rows.status != "done").any():
            lines.append(f"- {claim}: pending (`{cell}` or `{base}` has seeds left).")
            continue
        done = placed(rows)
        ours, base_done = rows[rows.cell == cell], done[done.cell == base]
        unplaced = ours[~ours.index.isin(done.index)]
        if len(unplaced) and len(base_done) == (rows.cell == base).sum():
            # emergence of an unplaced seed is at least its censored start or its budget
            bound = unplaced.updates.where(unplaced.censored.astype(bool), unplaced.steps)
            floor = pd.concat([done[done.cell == cell].updates, bound]).mean()
            top = bootstrap_mean(base_done.updates)[2]
            at_least = floor / top
            verdict = "disagrees" if at_least > 1.5 else "inconclusive at this scale"
            said = f"**{verdict}**; " if cell.startswith("size") else ""
            budget = f"{int(ours.steps.max()):,}"
            lines.append(
                f"- {claim}: {said}{len(unplaced)} of {len(ours)} seeds of `{cell}` placed no "
                f"transition within {budget} updates (censored or none); counting each at its "
                f"censored start or budget, its mean is at least {floor:,.0f}, "
                f"{at_least:.2f}x the upper end of `{base}`'s interval ({top:,.0f})."
            )
            continue
        point, lo, hi = log_ratio(done[done.cell == cell].updates, base_done.updates)
        if not np.isfinite(point):
            lines.append(f"- {claim}: no transition placed in `{cell}` or `{base}`.")
            continue
        ratio = f"`{cell}` / `{base}` = {10**point:.2f}"
        if cell.startswith("size"):
            verdict, why = verdict_same((lo, hi))
            lines.append(f"- {claim}: **{verdict}**; {ratio}, {why}.")
        else:
            lines.append(f"- {claim}: {ratio}, 95% interval [{10**lo:.2f}, {10**hi:.2f}].")
    return lines


def cell_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, group in frame.groupby("cell", sort=False):
        done = group[group.status == "done"]
        formed = placed(done)
        value = (
            interval(*bootstrap_mean(formed.updates), spec=",.0f") if len(formed) else "none placed"
        )
        if len(done) < len(group):
            value = f"pending ({value if len(done) else 'nothing done'})"
        rows.append({
            "cell": name, "B": group.B.iloc[0], "C": group.C.iloc[0],
            "updates/run": ",".join(str(int(x)) for x in sorted(set(done.steps))) or "-",
            "seeds done": ",".join(str(s) for s in done.seed) or "none",
            "pending seeds": ",".join(str(s) for s in group[group.status != "done"].seed) or "-",
            "transitions (uncensored)": f"{len(formed)}/{len(done)}",
            "emergence updates, mean [95% CI over seeds]": value,
            "train s/seed": f"{done.train_s.mean():.0f}" if len(done) else "-",
            "probe s/seed": f"{done.probe_s.mean():.1f}" if len(done) else "-",
        })  # fmt: skip
    return pd.DataFrame(rows)


def rerun_lines(frame: pd.DataFrame, out: str) -> list[str]:
    """Which cells the table shows from their reruns with a longer budget, and how far each
    seed's emergence moved between its first run and its rerun."""
    reruns = sorted(set(frame[frame.budget_factor > 1].cell))
    if not reruns:
        return []
    lines = [f"Cells with a seed censored at their budget, rerun with all seeds at {EXTEND}x that "
             "budget (`--extend-censored`; the reruns replace the cell's runs everywhere below). "
             "Emergence updates per seed, first run -> rerun (a rerun is a fresh run: its "
             "warm-up and checkpoints differ):", ""]  # fmt: skip
    for cell in reruns:
        moves = []
        for row in frame[frame.cell == cell].itertuples():
            first = read_result(run_dir(out, cell, row.seed)) or {}
            moves.append(f"seed {row.seed} {_emergence(first)} -> {_emergence(row._asdict())}")
        lines.append(f"- `{cell}`: " + "; ".join(moves) + ".")
    return [*lines, ""]


def _emergence(result: dict) -> str:
    if not result.get("transition"):
        return f"none by {int(result.get('steps', 0)):,}"
    prefix = ">= " if result.get("censored") else ""  # censored: the start of its rise
    return f"{prefix}{result['updates']:,.0f}"


TITLE = "[A]'s emergence law on semi-natural data, with seeds (issue 15)"


def report(args) -> None:
    frame = collect(args)
    frame.to_csv(OUT_CSV, index=False)
    lines = [
        *report_header(TITLE, "validate_papers_law.py", "--cell CELL --seed SEED", frame),
        "Settings: GPT-NeoX, 4 heads, d_model 64 and 2 layers unless the cell says otherwise; "
        f"AdamW lr 3e-3, 1% warm-up then constant (sched-cosine: cosine to 0), grad clip 1; "
        "updates per run as in the table (the cell's budget, see the docstring), "
        f"{args.checkpoints} "
        "log-spaced checkpoints; seeds "
        f"{', '.join(map(str, SEEDS))}. Data and grids: see the docstring of "
        "`benchmarks/validate_papers_law.py`. Emergence = start of the steep segment of a "
        "3-segment fit of max prefix matching vs log tokens (probe n = 16, 50 rows).", "",
        "Per-seed rows, wall times and status: `RESULTS_papers_law.csv`. Cells whose seeds are not",
        "all done are **pending**: their numbers are not findings.", "",
        *markdown(cell_table(frame)), "", *rerun_lines(frame, args.out), "## Fits", "",
        *fit_lines(frame, "semi-natural"), *fit_lines(frame, "fixed-structure", b=0.0), "",
        "## Model size and schedule", "", *compared_lines(frame), "",
    ]  # fmt: skip
    OUT_MD.write_text("\n".join(lines))
    print(f"wrote {OUT_MD.name} and {OUT_CSV.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", help="run only this cell (repeatable)")
    parser.add_argument("--seed", type=int, action="append", help="run only this seed")
    parser.add_argument("--list", action="store_true", help="list the cells and their status")
    parser.add_argument("--report", action="store_true", help="only rewrite the results files")
    parser.add_argument(
        "--extend-censored",
        action="store_true",
        help=f"rerun every seed of each cell with a censored seed with {EXTEND}x its budget; "
        "once all are done they replace the cell's runs",
    )
    parser.add_argument("--steps", type=int, help="updates per run (default: the cell's budget)")
    parser.add_argument("--checkpoints", type=int, default=40, help="log-spaced (1.3x apart)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--state-every", type=int, default=100, help="updates between states")
    parser.add_argument("--out", default=str(ROOT / "runs" / "validate-papers" / "law"))
    args = parser.parse_args()
    table = cells()
    unknown = sorted(set(args.cell or ()) - set(table))
    if unknown:
        parser.exit(2, f"unknown cell(s) {unknown}: see --list.\n")
    if args.list:
        print(collect(args)[["cell", "seed", "grid", "B", "C", "status"]].to_string(index=False))
        return
    if args.extend_censored:
        for name in censored_cells(args):
            for seed in args.seed or SEEDS:
                if not args.cell or name in args.cell:
                    run_cell(name, table[name], seed, args, factor=EXTEND)
    elif not args.report:
        for name in args.cell or table:
            for seed in args.seed or SEEDS:
                run_cell(name, table[name], seed, args)
    report(args)


if __name__ == "__main__":
    main()
