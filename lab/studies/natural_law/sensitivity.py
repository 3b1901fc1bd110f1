"""Checks added after the data, before the first verdict (a referee's): how far the declared
fit's reading moves under other defensible choices. None changes a verdict; each says, by code,
whether it would.

- **Profile-likelihood intervals** for b and c beside the declared Wald t-intervals: with most
  runs censored the likelihood is lopsided, and a Wald interval is symmetric by construction.
- **Runs still rising at their last probe:** the declared rule censors a run whose rise is under
  0.1 at its last probe, at that probe. The same rule without the 0.1 places the start of the
  rise; such a run is refitted censored at that start (a lower bound if the rise goes on), and
  placed there (the earliest it could be).
- **Those runs continued** past the budget to 3x the law, in a copy of their folders
  (:mod:`studies.natural_law.extend`), read by the declared rule in place of their records.
- **Runs with no rise at all** (censored, and flat even by the rule without its 0.1 floor)
  taken as never forming a head rather than as onsets later than their budgets: left out.
- **Coverage** of the declared t-interval: runs simulated from the fitted law (its sigma) at
  the same cells, each censored at its own budget, refitted as declared.

>>> rising_starts(pd.DataFrame({"status": ["pending"], "cell": ["B1-C64"]}))
{}
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

import ihprobe
from ihprobe.dynamics.law import (
    law_design,
    maximum_likelihood,
    profile_cut,
    profile_interval,
    simulated_coverage,
)
from ihprobe.dynamics.verdicts import LEVEL, Estimate
from lab.studies.natural_law import cells, claims, extend

DRAWS = 200  # simulated grids behind a coverage figure


def design(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, X, censored) of the declared fit: log10 U on 1, -log10 B, -log10 C."""
    X, _, _ = law_design(runs)
    return np.log10(runs.updates.to_numpy(float)), X, runs.censored.to_numpy(bool)


def profiles(runs: pd.DataFrame) -> dict[str, Estimate]:
    """b and c with profile-likelihood intervals, cut so that without censoring they are the
    declared t(runs - 3) interval (:func:`profile_cut`); with censoring they follow the
    likelihood's own shape."""
    y, X, cens = design(runs)
    df = len(runs) - X.shape[1]
    cut = profile_cut(len(runs), df, LEVEL)
    theta, _, ok = maximum_likelihood(y, X, cens)
    how = f"profile likelihood, t({df}) cut, {int(cens.sum())} of {len(runs)} runs censored"
    out = {}
    for column, name in ((1, "b"), (2, "c")):
        low, high = profile_interval(y, X, cens, column, cut) if ok else (math.nan, math.nan)
        out[name] = Estimate(float(theta[column]), low, high, how, 1)
    return out


def rising_starts(frame: pd.DataFrame) -> dict[tuple[str, int], float]:
    """Censored runs without a transition whose live curve the declared rule, without its
    0.1 floor, places: (cell, seed) -> the updates at the start of that rise."""
    done = frame[frame.status == "done"]
    return {
        (r.cell, int(getattr(r, "seed", 0))): s
        for r in done.itertuples()
        if (s := rising_start(r)) is not None
    }


def label(cell: str, seed: int) -> str:
    """A run's name in a sentence: its cell, and its seed where not 0 (one seed per cell)."""
    return cell if seed == 0 else f"{cell} seed {seed}"


def _at(runs: pd.DataFrame, keys) -> np.ndarray:
    """Which of ``runs`` (:func:`claims.runs_of`) are the runs ``keys`` name: (cell, seed)."""
    return np.array([k in keys for k in zip(runs.cell, runs.seed, strict=True)], dtype=bool)


def rising_start(run) -> float | None:
    """The updates at which a censored run's rise begins by the declared rule without its 0.1
    floor (None for a placed run, or a curve with no rise at all); ``run``: a results row."""
    if not bool(run.censored) or bool(run.transition):
        return None
    table = _curve_table(run.curve, int(run.B) * int(run.C))
    point = ihprobe.emergence(table, batch_size=int(run.B), context=int(run.C), min_rise=0.0)
    return float(point.updates) if point.transition else None


def _curve_table(curve: str, per_update: int) -> pd.DataFrame:
    """The live probes of one run from its CSV ``curve`` cell (``tokens_M: PS (AR), ...``)."""
    pairs = [part.split(": ") for part in curve.split(", ")]
    tokens = [float(at) * 1e6 for at, _ in pairs]
    steps = [round(t / per_update) for t in tokens]
    return pd.DataFrame(
        {
            "step": steps,
            "tokens": [s * per_update for s in steps],
            "metric": "prefix_matching",
            "value": [float(said.split(" ")[0]) for _, said in pairs],
        }
    )


def coverage(runs: pd.DataFrame, budgets, draws: int = DRAWS, seed: int = 0) -> dict[str, float]:
    """How often the declared t-interval covers the fitted b and c, over ``draws`` grids drawn
    from the fitted law at ``runs``' cells, each run censored at its budget (updates)."""
    y, X, cens = design(runs)
    theta, _, _ = maximum_likelihood(y, X, cens)
    sigma, bounds = math.exp(theta[-1]), np.log10(np.asarray(budgets, float))
    hits = simulated_coverage(
        X, theta[:-1], sigma, bounds, draws=draws, seed=seed, small_sample=True
    )
    return {"b": float(hits[1]), "c": float(hits[2]), "sigma": sigma}


def flat(frame: pd.DataFrame, starts: dict | None = None) -> np.ndarray:
    """Per run of :func:`claims.runs_of`, in its order: censored without a transition and
    without a rise even by the rule without its 0.1 floor (a curve at chance to the end);
    ``starts``: :func:`rising_starts` of ``frame`` where the caller has them."""
    done = claims.finished(frame)
    starts = rising_starts(frame) if starts is None else starts
    seeds = done.seed if "seed" in done else pd.Series(0, index=done.index)
    keys = zip(done.cell, seeds.astype(int), strict=True)
    rising = np.array([k in starts for k in keys], dtype=bool)
    return (
        done.censored.astype(bool).to_numpy() & ~done.transition.astype(bool).to_numpy() & ~rising
    )


def _changes(
    declared: dict[str, str], other: dict[str, Estimate], runs: pd.DataFrame, cells: int = 0
) -> str:
    """A sentence: whether ``other``'s intervals, over ``runs`` (of ``cells`` cells run, if
    more than ``runs`` hold), give the declared verdicts."""
    cells, placed = max(cells, runs.cell.nunique()), int((~runs.censored).sum())
    moved = [
        f"{name} {said} (declared: {declared[name]})"
        for name in ("b", "c")
        if (said := claims.verdict(other[name], name, cells, placed)[0]) != declared[name]
    ]
    return "would give " + " and ".join(moved) if moved else "give the declared verdicts"


def rise_text(frame: pd.DataFrame, key: tuple[str, int], start: float) -> str:
    """One still-rising run in a sentence: where its rise starts (updates, tokens) and the
    rise its record fitted, under the rule's floor (from the CSV's ``reason``)."""
    row = frame[(frame.cell == key[0]) & (frame.seed.fillna(0).astype(int) == key[1])].iloc[0]
    said = (
        f"{label(*key)} from {start:,.0f} updates (about {start * row.B * row.C / 1e6:.0f}M tokens"
    )
    size = re.search(r"changes by ([\d.]+) from the start", str(row.get("reason", "")))
    return said + (f"; a rise of {float(size[1]):.2f})" if size else ")")


def _at_starts(runs: pd.DataFrame, starts, placed: bool) -> pd.DataFrame:
    """``runs`` with each still-rising run moved to the start of its rise, placed there or
    censored there (``starts``: :func:`rising_starts`)."""
    moved = runs.copy()
    at = _at(moved, starts)
    keys = zip(moved.cell[at], moved.seed[at], strict=True)
    moved.loc[at, "updates"] = [starts[k] for k in keys]
    moved.loc[at, "censored"] = not placed
    return moved


def readings(frame: pd.DataFrame) -> list[tuple[str, dict[str, Estimate], pd.DataFrame]]:
    """Every single reading beside the declared fit, as (its name in a headline, its b and c,
    the runs it fits): this section's checks, the placed runs alone, and the declared seeds
    alone (:data:`cells.SEEDS`) where other seeds have run; [] while the fit cannot be made."""
    runs = claims.runs_of(frame)
    if claims.fits(runs) is None:
        return []
    out = [("the profile-likelihood interval", profiles(runs), runs)]
    starts = rising_starts(frame)
    for how, placed in (("censored", False), ("placed", True)):
        moved = _at_starts(runs, starts, placed) if starts else None
        if moved is not None and (fit := claims.fits(moved)) is not None:
            out.append((f"the still-rising runs {how} at their starts", fit["model"], moved))
    rows, moved = _continued(runs, starts)
    if rows and (fit := claims.fits(moved)) is not None:
        out.append(("the still-rising runs continued", fit["model"], moved))
    at_chance = flat(frame, starts)
    if at_chance.any() and (fit := claims.fits(runs[~at_chance])) is not None:
        out.append(("the runs that never rose left out", fit["model"], runs[~at_chance]))
    placed = runs[~runs.censored]
    if (fit := claims.fits(placed)) is not None:
        out.append(("the placed runs alone", fit["model"], placed))
    declared_seeds = runs[runs.seed.isin(cells.SEEDS)]
    if len(declared_seeds) < len(runs) and (fit := claims.fits(declared_seeds)) is not None:
        out.append(("the declared seeds alone", fit["model"], declared_seeds))
    return out


def fragility(frame: pd.DataFrame, found: list | None = None) -> dict[str, str]:
    """For b and c, the clause its headline ends with: which single readings (:func:`readings`,
    or ``found``) give another verdict than the declared rule's, and which one each gives."""
    found = readings(frame) if found is None else found
    declared, cells_run = claims.verdicts(frame), claims.runs_of(frame).cell.nunique()
    out = {}
    for name in ("b", "c"):
        moved: dict[str, list[str]] = {}
        for how, fit, runs in found:
            said = claims.verdict(fit[name], name, cells_run, int((~runs.censored).sum()))[0]
            if said != declared[name]:
                moved.setdefault(said, []).append(how)
        if not found:
            out[name] = ""
        elif not moved:
            out[name] = " No single reading below moves it."
        else:
            out[name] = (
                " Fragile: "
                + "; ".join(
                    f"{_joined(hows)} {'each give' if len(hows) > 1 else 'gives'} {said}"
                    for said, hows in moved.items()
                )
                + " (each reading below)."
            )
    return out


def _joined(items: list[str]) -> str:
    """``a, b and c``.

    >>> _joined(["a"]), _joined(["a", "b", "c"])
    ('a', 'a, b and c')
    """
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def _continued(runs: pd.DataFrame, starts) -> tuple[dict, pd.DataFrame]:
    """The finished continuations of the still-rising runs, and ``runs`` with them in place."""
    rows = {key: row for key in starts if (row := extend.continued(*key)) is not None}
    moved = runs.copy()
    for key, row in rows.items():
        moved.loc[_at(moved, {key}), ["updates", "censored"]] = [row["updates"], row["censored"]]
    return rows, moved


def continued_verdicts(frame: pd.DataFrame) -> dict[str, str] | None:
    """The verdicts on b and c with every finished continuation in place of its run's record
    (None where no run was continued): what the README says beside the declared verdicts."""
    runs = claims.runs_of(frame)
    rows, moved = _continued(runs, rising_starts(frame))
    fit = claims.fits(moved) if rows else None
    if fit is None:
        return None
    cells, placed = moved.cell.nunique(), int((~moved.censored).sum())
    return {name: claims.verdict(fit["model"][name], name, cells, placed)[0] for name in "bc"}


def _continued_lines(runs: pd.DataFrame, starts, declared: dict[str, str]) -> list[str]:
    """The still-rising runs continued to 3x the law, and the fit with them in place."""
    rows, moved = _continued(runs, starts)
    if not rows:
        return []
    said = [
        f"{label(*key)} {'still censored' if row['censored'] else 'placed'} at "
        f"{row['updates']:,.0f} updates ({_of_law(row)}max PS {row['max_ps']:.3f})"
        for key, row in rows.items()
    ]
    refit = claims.fits(moved)["model"]
    return [
        f"- Continued past the budget to {extend.EXTENDED_X:g}x the law in a copy of the run "
        f"(`extend.py`), by the declared rule: {'; '.join(said)}.",
        f"  - each in place of its record: b = {refit['b'].text('.2f')}, c = "
        f"{refit['c'].text('.2f')}; these {_changes(declared, refit, moved)}.",
    ]


def _of_law(row) -> str:
    """``1.33x the law; `` for a continued run's onset, where its cell's law is known."""
    cell = cells.CELLS.get(row.get("cell", ""))
    if cell is None:
        return ""
    law = cells.predict_emergence(cell["batch_size"], cell["context"]).updates
    return f"{row['updates'] / law:.2f}x the law; "


def _flat_lines(
    frame: pd.DataFrame, runs: pd.DataFrame, declared: dict[str, str], starts: dict | None = None
) -> list[str]:
    """The fit without the runs whose curves never rose (none: no line)."""
    at_chance = flat(frame, starts)
    kept = runs[~at_chance]
    fit = claims.fits(kept) if at_chance.any() else None
    if fit is None:
        return []
    refit, cells = fit["model"], runs.cell.nunique()
    return [
        f"- Runs with no rise at all ({int(at_chance.sum())} of {len(runs)}) taken as never "
        "forming a head rather than as onsets later than their budgets, and left out: b = "
        f"{refit['b'].text('.2f')}, c = {refit['c'].text('.2f')} (over the "
        f"{kept.cell.nunique()} cells that keep a run; the verdicts' gate counts the {cells} "
        f"cells run); these {_changes(declared, refit, kept, cells)}."
    ]


def lines(frame: pd.DataFrame) -> list[str]:
    """The results file's section of these checks (empty while the fit cannot be made)."""
    runs = claims.runs_of(frame)
    fit = claims.fits(runs)
    if fit is None:
        return []
    declared = claims.verdicts(frame)
    shown = profiles(runs)
    out = [
        "## Sensitivity (added after the data, before the first verdict)",
        "",
        "Not part of the declared design; the verdicts above stand by it. Each line says, by "
        "code, whether it would change them.",
        "",
        f"- Profile-likelihood intervals: b = {shown['b'].text('.2f')}, c = "
        f"{shown['c'].text('.2f')}; they {_changes(declared, shown, runs)}.",
    ]
    starts = rising_starts(frame)
    if starts:
        out.append(
            "- Runs still rising at their last probe, by the onset rule without its 0.1 floor "
            f"(where the rise starts, and its fitted size by the budget's end): "
            f"{'; '.join(rise_text(frame, key, u) for key, u in starts.items())}."
        )
        for how, placed in (("censored at that start", False), ("placed there", True)):
            moved = _at_starts(runs, starts, placed)
            refit = claims.fits(moved)["model"]
            out.append(
                f"  - {how}: b = {refit['b'].text('.2f')}, c = {refit['c'].text('.2f')}; "
                f"these {_changes(declared, refit, moved)}."
            )
        out += _continued_lines(runs, starts, declared)
    out += _flat_lines(frame, runs, declared, starts)
    placed = runs[~runs.censored]
    if (alone := claims.fits(placed)) is not None:
        refit = alone["model"]
        out.append(
            f"- The placed runs alone ({len(placed)} of {len(runs)}; a fit that drops every "
            f"bound): b = {refit['b'].text('.2f')}, c = {refit['c'].text('.2f')}; these "
            f"{_changes(declared, refit, placed, runs.cell.nunique())}."
        )
    covered = coverage(runs, claims.finished(frame).steps.astype(float).to_numpy())
    out += [
        f"- Coverage of the declared 95% t-interval, from {DRAWS} grids simulated from the fitted "
        f"law (sigma {covered['sigma']:.2f} in log10 updates) at these {len(runs)} runs' cells, "
        f"each censored at its budget: b {covered['b']:.2f}, c {covered['c']:.2f}.",
        "",
    ]
    return out
