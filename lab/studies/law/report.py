"""``RESULTS_papers_law.md`` below its header: the cell table, the law's fits per grid with
their verdicts, and the sections the claims module draws (:mod:`studies.law.claims`).

>>> FEW_CLUSTERS
10
"""

from __future__ import annotations

import pandas as pd

from ihprobe.dynamics.law import cell_means_fit, censored_fit
from ihprobe.dynamics.verdicts import MIN_SEEDS, family_note, judge
from ihprobe.jobs.grid import markdown
from lab.studies.law.claims import (
    CLAIMS,
    COMMAND,
    cell_table,
    compared_lines,
    done_of,
    lr_change_line,
    repetition_lines,
    rerun_lines,
    runs_of,
    slope_line,
    warmup_change_line,
)
from lab.studies.law.control import control_lines


def fit_lines(frame: pd.DataFrame, grid: str, names, fixed: dict | None = None) -> list[str]:
    """The law fitted on a grid's cells: on cell means (placed runs only, when no run is
    censored) and by Tobit over every run; verdicts from the Tobit fit when a run is censored,
    else from the cell means."""
    fixed = fixed or {}
    names = list(names)
    done = done_of(frame, names)
    missing = [c for c in names if c not in set(done.cell)]
    if missing:
        return [
            f"- **{grid}**: pending, no seed done in {', '.join(missing)} "
            f"(`{COMMAND.format(' --cell '.join(missing))}`)."
        ]
    runs = runs_of(done)
    free = [k for k in ("b", "c") if k not in fixed]
    held = "".join(f", {k} fixed at {v:g}" for k, v in fixed.items())
    sizes = sorted(set(runs.groupby("cell").size()))
    seeds = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    lines = [
        f"- **{grid}** ({len(runs)} runs in {len(names)} cells, {seeds} seeds per cell, "
        f"{int(runs.censored.sum())} censored{held}):"
    ]
    means = None
    if not runs.censored.any():
        means = cell_means_fit(runs, fixed=fixed)
        lines.append("  - on cell means: " + _fit_text(means, free))
    else:
        lines.append(
            "  - on cell means: not fitted (a cell with censored runs has no unbiased mean)"
        )
    tobit = censored_fit(runs, fixed=fixed)
    lines.append("  - Tobit over every run: " + _fit_text(tobit, free))
    judged = tobit if runs.censored.any() else means
    said = [(k, *judge(judged[k], CLAIMS[k])) for k in free]
    lines.append(
        f"  - against [A] (rule: the {'Tobit' if judged is tobit else 'cell-means'} "
        "interval inside / wholly outside the margin): "
        + "; ".join(f"{k} **{v}** ({why})" for k, v, why in said)
        + "."
    )
    if judged is tobit and tobit["cells"] < FEW_CLUSTERS:
        lines.append(
            f"  - {tobit['cells']} cells are {tobit['cells']} clusters for the cell-clustered "
            "sandwich, too few for it to be reliable (it tends to be too narrow even with the "
            "t on cells - parameters): read an 'agrees' or 'disagrees' here with that caution."
        )
    if means is not None and not fixed:
        rms = {
            label: cell_means_fit(runs, fixed=law)["rms"]
            for label, law in (
                ("[A]'s exponents 0.37, 0.62", {"b": 0.37, "c": 0.62}),
                ("square-root form 0.5, 0.5", {"b": 0.5, "c": 0.5}),
            )
        }
        lines.append(
            f"  - residual RMS of the cell means (log10 U, T refitted each time): "
            f"free exponents {means['rms']:.3f}; "
            + "; ".join(f"{k} {v:.3f}" for k, v in rms.items())
            + "."
        )
    return lines


FEW_CLUSTERS = 10  # cells below which a cell-clustered sandwich is said to be unreliable


def _fit_text(fit: dict, free) -> str:
    T = fit["log10T"]
    parts = [f"log10 T {T.value:.2f} [{T.low:.2f}, {T.high:.2f}]"]
    parts += [f"{k} {fit[k].value:.2f} [{fit[k].low:.2f}, {fit[k].high:.2f}]" for k in free]
    return ", ".join(parts) + f" (95% t-intervals; {T.method})"


def report_lines(frame: pd.DataFrame, extend: int, size_at: tuple[int, int]) -> list[str]:
    """Everything below the header of ``RESULTS_papers_law.md``."""
    grid = frame[frame.grid == "semi-natural"].cell.unique()
    fixed = frame[frame.grid == "fixed-structure"].cell.unique()
    return [
        "Statistics (`ihprobe/dynamics/verdicts.py`): cell means with Student-t 95% intervals over "
        "seeds; fits on cell means (t, df = cells - parameters) and Tobit fits over every run "
        "that keep censored runs at their bound (sandwich clustered by cell); ratios by Welch's "
        "t on log10 updates, or Tobit with a cell term when a run is censored. Verdicts use "
        "margins declared before the data ([A]'s b and c +- 0.15; 'no change' within 1.5x "
        f"either way): 'agrees' only when the whole interval lies inside, 'disagrees' only when "
        f"it lies wholly outside. A cell mean or ratio needs {MIN_SEEDS} seeds per cell to be a "
        f"finding; fewer, and its verdict is pending. {family_note()}",
        "",
        "Per-seed rows, wall times and status: `RESULTS_papers_law.csv`.",
        "",
        *markdown(cell_table(frame)),
        "",
        *rerun_lines(frame, extend),
        "## Fits",
        "",
        *fit_lines(frame, "semi-natural", grid),
        *fit_lines(frame, "fixed-structure", fixed, fixed={"b": 0.0}),
        "",
        "## Model size and schedule",
        "",
        *compared_lines(frame, size_at),
        "",
        "## Where the exponents come from (issue 24)",
        "",
        *experiment_lines(frame),
        "",
        "## Control: i.i.d. tokens",
        "",
        *control_lines(frame),
        "",
    ]


def experiment_lines(frame: pd.DataFrame) -> list[str]:
    """The issue-24 cells: where the exponents come from."""
    corners = [f"B{B}-C{C}" for B in (8, 32) for C in (32, 128)]
    natural = [f"nr-B8-C{C}" for C in (32, 64, 128, 256)]
    return [
        "Larger batches at C = 64 (does the slope bend toward [A]'s b?):",
        slope_line(frame, "b from B = 32 to 64", "sn-B32-C64", "bs-B64-C64", 2),
        slope_line(frame, "b from B = 64 to 128", "bs-B64-C64", "bs-B128-C64", 2),
        "",
        "Learning rate (b from B = 8 to 32 at C = 64, per learning rate; [A] used 2.5e-4):",
        slope_line(frame, "lr 3e-3 (the grid)", "sn-B8-C64", "sn-B32-C64", 4),
        *(
            slope_line(frame, f"lr {lr}", f"lr{lr}-B8-C64", f"lr{lr}-B32-C64", 4)
            for lr in ("1e-3", "3e-4")
        ),
        *(lr_change_line(frame, lr) for lr in ("1e-3", "3e-4")),
        "",
        "Warm-up fixed in tokens (1M tokens in every cell, as [A] fixes 10M) at the four corners, "
        "against the same corners with a 1% warm-up:",
        *fit_lines(frame, "corners, 1% warm-up", [f"sn-{c}" for c in corners]),
        *fit_lines(frame, "corners, warm-up in tokens", [f"wu-{c}" for c in corners]),
        *(
            slope_line(frame, f"b at C = {C}, {how}", f"{tag}-B8-C{C}", f"{tag}-B32-C{C}", 4)
            for C in (32, 128)
            for tag, how in (("sn", "1% warm-up"), ("wu", "warm-up in tokens"))
        ),
        *(warmup_change_line(frame, C) for C in (32, 128)),
        "",
        "Repetition that grows with C as in natural text (B = 8; c with b fixed at 0):",
        *fit_lines(frame, "natural-repetition", natural, fixed={"b": 0.0}),
        *(
            slope_line(
                frame,
                f"c from C = {C} to {2 * C}, {how}",
                f"{tag}-B8-C{C}",
                f"{tag}-B8-C{2 * C}",
                2,
                exponent="c",
            )
            for C in (32, 64)
            for tag, how in (("sn", "repetition 0.9"), ("nr", "natural repetition"))
        ),
        *repetition_lines(frame),
    ]
