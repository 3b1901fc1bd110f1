"""[A]'s size independence on natural text: one cell of the grid (B = 4, C = 256) at d_model 64,
128 and 256 and attention-only, declared before any run. Does the onset in updates move with
the model's size?

Each arm's onset (geometric mean over seeds, censored runs at their bound, Tobit) is compared
with d_model 128's, the recipe: [A]'s law says the same within 1.5x either way. Seeds 0-2 run
first; a ratio is a finding only at 5 seeds per arm, pending before.

>>> list(ARMS), ARMS["B4-C256-d64"]["d_model"], ARMS["B4-C256-ao"]["d_mlp"]
(['B4-C256', 'B4-C256-d64', 'B4-C256-d256', 'B4-C256-ao', 'B4-C256-d256-lr1e-3'], 64, 0)
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ihprobe.dynamics.verdicts import holm
from lab.studies.natural_law import grid_study, lr_arm, report
from lab.studies.natural_law import size_claims as sc
from lab.studies.natural_law.cells import CELLS

CELL = sc.BASE  # d_model 128: the grid's own cell and run
ARMS = {
    CELL: CELLS[CELL],
    f"{CELL}-d64": {**CELLS[CELL], "d_model": 64},
    f"{CELL}-d256": {**CELLS[CELL], "d_model": 256},
    f"{CELL}-ao": {**CELLS[CELL], "d_mlp": 0},
    lr_arm.ARM: {**CELLS[CELL], **lr_arm.FIELDS},  # post hoc: size or learning rate?
}
SEEDS = tuple(range(sc.SEEDS))
PILOTS = Path(__file__).resolve().parents[1] / "natural" / "RESULTS_papers_natural.csv"
LABELS = {
    CELL: "d_model 128",
    f"{CELL}-d64": "d_model 64",
    f"{CELL}-d256": "d_model 256",
    f"{CELL}-ao": "attention-only, d_model 128",
    lr_arm.ARM: "d_model 256 at lr 1e-3 (post hoc)",
}


def ratio_lines(frame: pd.DataFrame) -> list[str]:
    """[A]'s size verdict, then each arm's onset over d_model 128's with its verdict (pending
    below 5 seeds an arm) and, beneath it, the amended checks."""
    said, _ = sc.size_verdict(frame)
    out = [f"- **[A]'s size claim (d_model 64 and 256 together): {said}**."]
    if len(sc.runs_of(frame)):
        out.append(f"- Each arm in short: {summary(frame)}.")
    for arm in (*sc.SIZES, *sc.OTHER):
        out += arm_lines(frame, arm)
    out.append(regime_line(frame))
    censored = "; ".join(f"{LABELS[arm]}: {sc.censoring(frame, arm)}" for arm in ARMS)
    out.append(f"- Censored runs: {censored}.")
    out.append(family_line(frame))
    apart = [f"{a} of {sc.SEEDS} against {b}" for a, b in sc.detectable_splits() if a < b]
    out.append(
        f"- At {sc.SEEDS} seeds an arm, Fisher's test can find two shares of seeds with a head "
        f"apart only where they are as far apart as {', '.join(apart)} (either way round)."
    )
    n, chance = sc.seeds_for_power(), sc.agreement_power(sc.SEEDS)
    out.append(
        f"- Power: at a between-seed SD of {sc.SEED_SD} decades and no censoring, 'agrees' "
        f"comes out of a true ratio of 1 with a chance of {chance:.2g} at {sc.SEEDS} seeds an "
        f"arm, and of 0.8 only from about {n} seeds an arm: at {sc.SEEDS}, 'inconclusive at "
        "this scale' is the expected verdict even where [A] holds, and is not support for it."
    )
    return out


def holm_adjusted(runs: pd.DataFrame) -> dict[str, float]:
    """Holm's adjusted p of each arm's share-of-heads test against d_model 128, over the arms
    that have finished runs (none while d_model 128 has none)."""
    arms = [
        a for a in (*sc.SIZES, *sc.OTHER) if (runs.cell == a).any() and (runs.cell == CELL).any()
    ]
    adjusted = holm([sc.formation(runs, arm)[2] for arm in arms]) if arms else []
    return dict(zip(arms, adjusted, strict=True))


def family_line(frame: pd.DataFrame) -> str:
    """The shares of seeds with a head are tested arm by arm at 5%, with no correction across
    the arms: Holm's adjusted p beside them, so a reader sees which 'differs' would hold
    family-wise."""
    adjusted = holm_adjusted(sc.runs_of(frame))
    if not adjusted:
        return "- Shares of seeds with a head: no arm to compare yet."
    arms, each = list(adjusted), ", ".join(f"{LABELS[a]} {p_text(p)}" for a, p in adjusted.items())
    return (
        f"- The {len(arms)} shares of seeds with a head are each tested against d_model 128 at "
        f"5%, with no correction across them; Holm's adjusted p (family-wise 5%): {each}."
    )


def regime_line(frame: pd.DataFrame, pilots: Path = PILOTS) -> str:
    """The learning rate every arm shares, beside the d_model 256 pilots that ran at another
    one; where d_model 256 has a smaller share of seeds with a head than d_model 128, a
    sentence that the learning rate, not size, may be the cause."""
    wide = pd.read_csv(pilots)
    wide = wide[(wide.d_model == 256) & (wide.status == "done") & (wide.B == 4) & (wide.C == 256)]
    line = "- Regime: every arm at the grid's AdamW lr 3e-3 (constant after a 1% warm-up)."
    if len(wide):
        rises = " and ".join(f"{m:.1f}M" for m in wide.onset_M.dropna()) or "no onset in"
        lr = f"{wide.lr.iloc[0]:.0e}".replace("e-0", "e-")
        line += (
            f" The d_model 256 pilots at lr {lr} (the same corpus, B and C; {len(wide)} seeds "
            f"to {wide.budget_M.max():g}M tokens; `lab/studies/natural/RESULTS_papers_natural.md`) "
            f"rose from {rises} tokens to max PS "
            f"{' and '.join(f'{v:.2f}' for v in wide.max_PS)}."
        )
    runs = sc.runs_of(frame)
    share = {arm: runs[runs.cell == arm].has_head.mean() for arm in (CELL, f"{CELL}-d256")}
    if len(wide) and share[f"{CELL}-d256"] < share[CELL]:  # NaN (no run) compares False
        line += (
            " So d_model 256's smaller share of seeds with a head here may be the learning "
            "rate's doing rather than size's: this arm tests size at lr 3e-3 only; the post hoc "
            f"arm at lr 1e-3 (below) judges which: **{lr_arm.lr_verdict(runs)[0]}**."
        )
    return line


def summary(frame: pd.DataFrame) -> str:
    """Each arm's finished seeds, placed onsets and seeds with a head, and beside the other
    arms their onset ratio and share-of-heads verdicts against d_model 128 (the verdicts'
    second line).

    >>> one = {"status": "done", "updates": 5e3, "censored": False, "has_head": True}
    >>> one |= {"B": 4, "C": 256, "tokens": 5e3 * 1024, "steps": 28_855}
    >>> summary(pd.DataFrame([{"cell": CELL, **one}])).split("; ")[0]
    'd_model 128: 1 finished, 1 placed, 1 with a head'
    """
    runs = sc.runs_of(frame)
    adjusted, out = holm_adjusted(runs), []
    for arm in ARMS:
        r = runs[runs.cell == arm]
        line = f"{LABELS[arm]}: {len(r)} finished, {int((~r.censored).sum())} placed, "
        line += f"{int(r.has_head.sum())} with a head"
        if arm in (*sc.SIZES, *sc.OTHER) and len(r) and (runs.cell == CELL).any():
            final = sc.ended(frame, arm)
            p, said = sc.formation(runs, arm)[2], sc.formation_verdict(runs, arm, final)
            ratio = sc.onset_ratio(runs, arm)
            onset = sc.verdict(ratio, runs, arm, final)[0]
            line += (
                f" (onset over d_model 128's: {ratio.text('.2f').split(' (')[0]}, {onset}, and "
                f"share with a head against d_model 128's: {said}, Fisher p = {p_text(p)}, "
                f"Holm's adjusted over {len(adjusted)} arm{'s' * (len(adjusted) > 1)} "
                f"{p_text(adjusted[arm])})"
            )
        out.append(line)
    return "; ".join(out)


def p_text(p: float) -> str:
    """A p-value to 2 decimals, or 2 significant digits under 0.1 (0.048 is not 0.05).

    >>> p_text(1.0), p_text(0.4), p_text(0.0476), p_text(0.00397)
    ('1.00', '0.40', '0.048', '0.004')
    """
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def arm_lines(frame: pd.DataFrame, arm: str) -> list[str]:
    """One arm's declared ratio and verdict, and its amended checks as sub-items."""
    runs, final, label = sc.runs_of(frame), sc.ended(frame, arm), LABELS[arm]
    if runs[runs.cell == arm].empty or runs[runs.cell == CELL].empty:
        missing = " and ".join(LABELS[c] for c in (arm, CELL) if runs[runs.cell == c].empty)
        return [f"- {label} over d_model 128: pending (no finished run of {missing} yet)."]
    ratio = sc.onset_ratio(runs, arm)
    said, why = sc.verdict(ratio, runs, arm, final)
    share, base, p = sc.formation(runs, arm)
    heads = sc.among_heads(runs, arm)
    headless = sc.headless_censored(runs)
    censored = sc.onset_ratio(headless, arm)
    profile = sc.profile_ratio(runs, arm)
    return [
        f"- {label} over d_model 128: {ratio.text('.2f')}: **{said}** ({why + '; ' if why else ''}"
        f"rule: {sc.CLAIM.says}).",
        f"  - seeds with a head: {share.text('.2f')} against {base.text('.2f')}; Fisher's "
        f"exact p = {p_text(p)}: **{sc.formation_verdict(runs, arm, final)}**"
        f"{_family_note(runs, arm, final)}.",
        f"  - onsets of the seeds with a head only: {heads.text('.2f')}.",
        f"  - a run without a head censored at its budget: {censored.text('.2f')}: "
        f"**{sc.verdict(censored, headless, arm, final)[0]}**.",
        f"  - a profile-likelihood interval: {profile.text('.2f')}: "
        f"**{sc.verdict(profile, runs, arm, final)[0]}**.",
        *_coverage_line(runs, arm),
    ]


def _family_note(runs: pd.DataFrame, arm: str, final: bool) -> str:
    """Where a share's "differs" does not hold under Holm's adjustment over the arms, the
    words that say so beside it ("" otherwise: the adjustment only raises p)."""
    adjusted = holm_adjusted(runs)
    if sc.formation_verdict(runs, arm, final) != "differs" or adjusted[arm] < sc.ALPHA:
        return ""
    return (
        f" (Holm's adjusted p over {len(adjusted)} arms, {p_text(adjusted[arm])}, finds no "
        "difference: this 'differs' does not hold family-wise)"
    )


def _coverage_line(runs: pd.DataFrame, arm: str) -> list[str]:
    covered = sc.coverage(runs, arm)
    if covered is None:  # a bound, or a fit without a maximum: no interval to calibrate
        return []
    return [
        f"  - coverage of the declared interval at this censoring: {covered[0]:.2f}, from 200 "
        f"pairs of arms drawn from its fit (sigma {covered[1]:.2f} in log10 updates), each run "
        "censored at its budget (a draw whose fit has no maximum covers nothing)."
    ]


# how this study's runs are trained: one thread each, up to three at once (the lr arm's last three)
RUNS = (
    "one thread a process (`OMP_NUM_THREADS=1`), up to three processes at once on a 2-core "
    "machine shared with other work (so `train_s` is a shared machine's wall time)"
)


def _report(frame: pd.DataFrame, provenance: list[str]) -> str:
    # a file rendered before RUNS recorded the grid's wording (one process at a time): said anew
    for said in (report.SHARED, report.OURS):
        provenance = [line.replace(said, RUNS) for line in provenance]
    lines = [
        "# [A]'s size independence on natural text: one cell, four sizes",
        "",
        *provenance,
        "",
        "## Declared design (written before the first run)",
        "",
        f"- Cell {CELL} of the natural-text grid (`RESULTS.md` beside this file: the same "
        "recipe, budget and onset rule); arms: d_model 64, 128 (the grid's own run) and 256 "
        "with MLPs (4 d_model wide), and attention-only at d_model 128.",
        f"- Claim: each arm's onset in updates over d_model 128's is {sc.CLAIM.says} (Tobit "
        "ratio of geometric means, censored runs at their bound); a verdict at 5 seeds an "
        "arm, pending before; seeds 0-2 run first.",
        "",
        "## Amended before any verdict",
        "",
        *sc.AMENDMENTS,
        "",
        "## Runs",
        "",
        "Columns as in the grid's `RESULTS.md`. The d_model 128 runs are the grid's B = 4, "
        "C = 256 runs (one folder each): either study's command trains or reuses them.",
        "",
        *report._markdown(report.run_table(frame, "natural_size")),
        "",
        "## Onset against size",
        "",
        *ratio_lines(frame),
        "",
        *lr_arm.lines(sc.runs_of(frame)),
        "",
    ]
    return "\n".join(lines)


STUDY = grid_study("natural_size", ("RESULTS_size.md", "results_size.csv"), ARMS, SEEDS, _report)
