"""The size arm's verdicts, declared before its first run and amended before any verdict.

- **Declared:** each arm's onset in updates over d_model 128's, a Tobit ratio of geometric
  means (censored runs at their bound), is the same within 1.5x either way; a verdict at 5
  seeds an arm, pending before.
- **Amended** (see :data:`AMENDMENTS`): a ratio is judged only where every arm that places
  any onset places at least ``MIN_PLACED`` (an arm with none gives a bound); [A]'s size
  claim is the d_model 64 and 256 arms together
  (:func:`~ihprobe.dynamics.verdicts.judge_all`), attention-only an architecture contrast
  beside it; and since a seed may form no head at all, the share of seeds with a head
  is compared on its own (Fisher's exact test), the onsets of the seeds with a head beside it.

>>> CLAIM.says, MIN_PLACED, seeds_for_power(sd=0.3), seeds_for_power(sd=0.1)
('within 1.5x either way', 3, 62, 8)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import integrate, stats

from ihprobe.dynamics.law import (
    censored_ratio,
    maximum_likelihood,
    profile_cut,
    profile_interval,
    simulated_coverage,
)
from ihprobe.dynamics.verdicts import (
    INCONCLUSIVE,
    LEVEL,
    Estimate,
    Pending,
    judge,
    judge_all,
    proportion,
    same_ratio,
    welch,
)
from lab.studies.natural_law import claims, sensitivity

BASE = "B4-C256"  # d_model 128: the grid's own cell
SIZES = (f"{BASE}-d64", f"{BASE}-d256")  # [A]'s claim: these against the base
OTHER = (f"{BASE}-ao",)  # attention-only: an architecture contrast, reported beside
SEEDS = 5
CLAIM = same_ratio(1.5)
MIN_PLACED = 3  # placed onsets in an arm before a ratio that reads them is judged
SEED_SD = 0.3  # decades: the between-seed spread the pilots showed, for the power line
ALPHA = 0.05  # Fisher's exact test on the share of seeds with a head
AMENDMENTS = [
    "- 2026-12-05, before any verdict (a referee's review, 3 of 5 seeds in the most advanced "
    f"arm): a ratio is judged only where every arm that places any onset places at least "
    f"{MIN_PLACED} (an arm with none gives a bound), else it is 'inconclusive at this scale': "
    "with one or two placed runs just under "
    "the other runs' bound, sigma collapses onto them and the declared rule alone says "
    "'agrees' of an arm whose other runs never placed (`tests/test_natural_size_claims.py` "
    "plants it).",
    "- The same day: a seed that forms no head by twice the law is not a late onset, so one "
    "log-normal over both mixes 'forms later' with 'never forms'. The share of seeds with a "
    "head (onset placed and the head check passed) is reported per arm and compared with "
    f"d_model 128's by Fisher's exact test (p < {ALPHA} says the shares differ); the onsets of "
    "the seeds with a head are compared beside it (Welch t), and the declared ratio is refitted "
    "with a run that has no head censored at its budget.",
    "- The same day: [A]'s size claim is judged on d_model 64 and 256 together (it agrees only "
    "if both agree, disagrees if either does); attention-only is an architecture contrast, "
    "judged by the same rule but not part of that verdict. Every arm keeps the grid's "
    "learning rate, 3e-3, so a size arm's verdict is one at that learning rate.",
    "- The same day: the declared (Wald) interval's variance is scaled by n / (n - 2), so "
    "that without censoring it is the exact pooled t-interval (the ML variance, RSS / n, made "
    "it too narrow: at 5 and 5 runs without censoring it covers 0.93, not 0.95); beside it a "
    "profile-likelihood interval, as a check on its symmetry under censoring; the verdict "
    "stays the Wald interval's.",
    "- The same day, with seeds 3 and 4 still running: beside each declared interval, its "
    "coverage at that arm's own censoring, simulated from the declared fit (200 pairs of arms, "
    "each run censored at its budget), since the n / (n - 2) scaling is exact only without "
    "censoring; the rule is unchanged.",
]


def runs_of(frame: pd.DataFrame) -> pd.DataFrame:
    """The finished runs with an onset or a bound, as the grid reads them
    (:func:`claims.runs_of`: cell, updates, censored, budget, ...), with ``has_head``."""
    done = frame[(frame.status == "done") & frame.updates.notna()]
    return claims.runs_of(frame).assign(has_head=done.has_head.astype(bool).to_numpy())


def ended(frame: pd.DataFrame, arm: str) -> bool:
    """Every declared seed of ``arm`` and the base has ended (no run to come)."""
    rows = frame[frame.cell.isin([arm, BASE])]
    return len(rows) >= 2 * SEEDS and bool((rows.status != "pending").all())


def onset_ratio(runs: pd.DataFrame, arm: str) -> Estimate:
    """The declared Tobit ratio of ``arm``'s onset over the base's, its variance scaled by
    n / (n - 2) (amended: without censoring, the exact pooled t-interval)."""
    return censored_ratio(runs, arm, BASE, needs=SEEDS)


def coverage(runs: pd.DataFrame, arm: str, draws: int = 200) -> tuple[float, float] | None:
    """(how often the declared interval covers the ratio, sigma in log10 updates), over
    ``draws`` pairs of arms drawn from the declared fit at these runs, each censored at its
    budget; None where the declared ratio is a bound or its fit reaches no maximum."""
    rows = runs[runs.cell.isin([arm, BASE])]
    if len(rows) < 3 or any(rows[rows.cell == c].censored.all() for c in (arm, BASE)):
        return None
    y, cens = np.log10(rows.updates.to_numpy(float)), rows.censored.to_numpy(bool)
    X = np.column_stack([np.ones(len(rows)), (rows.cell == arm).to_numpy(float)])
    theta, _, ok = maximum_likelihood(y, X, cens)
    if not ok:
        return None
    sigma, bounds = math.exp(theta[-1]), np.log10(rows.budget.to_numpy(float))
    hits = simulated_coverage(X, theta[:-1], sigma, bounds, draws=draws, small_sample=True)
    return float(hits[1]), sigma


def headless_censored(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with every run that has no head censored at its budget, placed onset or not."""
    return runs.assign(
        censored=runs.censored | ~runs.has_head,
        updates=runs.updates.where(runs.has_head, runs.budget),
    )


def profile_ratio(runs: pd.DataFrame, arm: str) -> Estimate:
    """The declared ratio with a profile-likelihood interval in place of the Wald one, which is
    symmetric however lopsided censoring makes the likelihood; its cut makes it the exact
    t-interval without censoring, as the amended Wald interval is."""
    rows = runs[runs.cell.isin([arm, BASE])]
    y, cens = np.log10(rows.updates.to_numpy(float)), rows.censored.to_numpy(bool)
    X = np.column_stack([np.ones(len(rows)), (rows.cell == arm).to_numpy(float)])
    df = len(rows) - 2
    whole = [c for c in (arm, BASE) if rows[rows.cell == c].censored.all()]  # no finite maximum
    theta, ok = np.full(3, np.nan), False
    if df >= 1 and not whole:
        theta, _, ok = maximum_likelihood(y, X, cens)
    cut = profile_cut(len(rows), max(df, 1), LEVEL)
    low, high = profile_interval(y, X, cens, 1, cut) if ok else (math.nan, math.nan)
    seeds = int(min((rows.cell == c).sum() for c in (arm, BASE)))
    how = f"profile likelihood, t({df}) cut, {int(cens.sum())} of {len(rows)} censored"
    how += f"; every run of {' and '.join(whole)} censored" if whole else ""
    value = float(theta[1]) if ok else math.nan
    return Estimate(value, low, high, how, seeds, SEEDS, log10=True)


def verdict(estimate: Estimate, runs: pd.DataFrame, arm: str, final: bool) -> tuple[str, str]:
    """(verdict, note): the declared rule on ``estimate``, with the amendment that an arm that
    places any onset needs ``MIN_PLACED`` of them first (``note`` says so where it applied)."""
    said, _ = judge(estimate, CLAIM, final=final)
    placed = runs[~runs.censored].groupby("cell").size()
    short = [c for c in (arm, BASE) if 0 < placed.get(c, 0) < MIN_PLACED]
    if said.startswith("pending") or not short:
        return said, ""
    counts = ", ".join(f"{c}: {placed[c]}" for c in short)
    return INCONCLUSIVE, f"fewer than {MIN_PLACED} placed onsets ({counts})"


def formation(runs: pd.DataFrame, arm: str) -> tuple[Estimate, Estimate, float]:
    """(arm's share of seeds with a head, the base's, Fisher's exact two-sided p)."""
    k = [int(runs[runs.cell == c].has_head.sum()) for c in (arm, BASE)]
    n = [int((runs.cell == c).sum()) for c in (arm, BASE)]
    p = stats.fisher_exact([[k[0], n[0] - k[0]], [k[1], n[1] - k[1]]])[1] if min(n) else math.nan
    return proportion(k[0], n[0]), proportion(k[1], n[1]), float(p)


def formation_verdict(runs: pd.DataFrame, arm: str, final: bool) -> str:
    """``"differs"`` (Fisher p < ALPHA), ``"no difference found"``, or pending below 5 seeds."""
    share, base, p = formation(runs, arm)
    seeds = min(share.seeds, base.seeds)
    if seeds < SEEDS and not final:
        return Pending(seeds, SEEDS)
    return "differs" if p < ALPHA else "no difference found"


def detectable_splits(seeds: int = SEEDS) -> list[tuple[int, int]]:
    """The (arm, base) counts of seeds with a head, of ``seeds`` each, for which Fisher's test
    says "differs": how far apart two shares must be before the comparison can find them apart.

    >>> detectable_splits(5)
    [(0, 4), (0, 5), (1, 5), (4, 0), (5, 0), (5, 1)]
    """
    counts = range(seeds + 1)
    return [
        (a, b)
        for a in counts
        for b in counts
        if stats.fisher_exact([[a, seeds - a], [b, seeds - b]])[1] < ALPHA
    ]


def among_heads(runs: pd.DataFrame, arm: str) -> Estimate:
    """Ratio of geometric mean onsets over the seeds with a head only (Welch t on log10)."""
    heads = runs[runs.has_head]
    return welch(heads[heads.cell == arm].updates, heads[heads.cell == BASE].updates, log=True)


def agreement_power(n: int, sd: float = SEED_SD, factor: float = 1.5) -> float:
    """The chance that the pooled t-interval of two arms of ``n`` uncensored seeds each lies
    wholly within ``factor`` either way when the true ratio is 1 (between-seed SD ``sd``
    decades): the mean difference is normal, its SD estimate chi on 2n - 2 df.

    >>> round(agreement_power(5), 3), round(agreement_power(60), 2)
    (0.0, 0.78)
    """
    df, margin = 2 * n - 2, math.log10(factor)
    t, se = stats.t.ppf(0.5 + LEVEL / 2, df), sd * math.sqrt(2 / n)

    def inside(q: float) -> float:  # q: the chi-square draw behind the SD estimate
        room = margin - t * se * math.sqrt(q / df)
        return max(0.0, 2 * stats.norm.cdf(room / se) - 1) * stats.chi2.pdf(q, df)

    return float(integrate.quad(inside, 0, df * (margin / (t * se)) ** 2)[0])


def seeds_for_power(power: float = 0.8, sd: float = SEED_SD, factor: float = 1.5) -> int:
    """The fewest seeds an arm at which :func:`agreement_power` reaches ``power``."""
    n = 2
    while agreement_power(n, sd, factor) < power:
        n += 1
    return n


def censoring(frame: pd.DataFrame, arm: str) -> str:
    """How an arm's censored runs ended: with no rise, or with a rise begun under the rule's
    0.1 (the declared rule without its floor places its start)."""
    done = frame[(frame.status == "done") & (frame.cell == arm) & frame.updates.notna()]
    censored = [r for r in done.itertuples() if bool(r.censored)]
    # a transition in the last interval is placed at the budget, censored: a rise at the end
    rising = [r for r in censored if r.transition or sensitivity.rising_start(r) is not None]
    if not censored:
        return f"none of {len(done)} censored"
    flat = len(censored) - len(rising)
    return f"{len(censored)} of {len(done)} ({flat} with no rise, {len(rising)} rising under 0.1)"


def size_verdict(frame: pd.DataFrame) -> tuple[str, str]:
    """[A]'s size claim: the d_model 64 and 256 ratios judged together."""
    runs = runs_of(frame)
    parts = [verdict(onset_ratio(runs, arm), runs, arm, ended(frame, arm)) for arm in SIZES]
    return judge_all(
        [
            (said, f"{arm}: {said}" + (f" ({note})" if note else ""))
            for arm, (said, note) in zip(SIZES, parts, strict=True)
        ]
    )
