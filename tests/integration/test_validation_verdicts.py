"""The verdict rules every validation script shares (ihprobe/dynamics/verdicts.py): each statistic
against a reference implementation or a known answer, and each verdict flipped by the data,
by the equivalence margin, by the seed count and by a censored cell."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ihprobe.dynamics import law as fits
from ihprobe.dynamics import verdicts as v

CELLS = [(B, C) for B in (8, 16, 32) for C in (32, 64, 128)]


def test_the_modules_examples_hold():
    failed, attempted = doctest.testmod(v)
    assert attempted > 0 and failed == 0


def test_t_mean_and_welch_match_scipy():
    a, b = [3.1, 2.7, 3.4, 2.9, 3.3], [2.0, 2.6, 1.7, 2.2]
    mean = v.t_mean(a)
    reference = stats.t.interval(0.95, len(a) - 1, loc=np.mean(a), scale=stats.sem(a))
    assert np.allclose((mean.low, mean.high), reference)
    assert mean.method == "t, 5 seeds" and mean.seeds == 5
    diff = v.welch(a, b)
    welch_ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert np.allclose((diff.low, diff.high), (welch_ci.low, welch_ci.high))
    ratio = v.welch(a, b, log=True)
    log_ci = stats.ttest_ind(np.log10(a), np.log10(b), equal_var=False).confidence_interval()
    assert np.allclose((ratio.low, ratio.high), (log_ci.low, log_ci.high)) and ratio.log10


def test_proportion_is_clopper_pearson():
    share = v.proportion(3, 5)
    exact = stats.beta.ppf([0.025, 0.975], [3, 4], [3, 2])  # Beta(k, n-k+1), Beta(k+1, n-k)
    assert np.allclose((share.low, share.high), exact) and "5 seeds" in share.text()


@pytest.mark.parametrize(
    ("interval", "margin", "verdict"),
    [
        ((0.30, 0.45), 0.15, "agrees"),  # wholly inside 0.37 +- 0.15
        ((0.30, 0.45), 0.05, "inconclusive at this scale"),  # the same data, a tighter margin
        ((0.80, 1.10), 0.15, "disagrees"),  # wholly outside
        ((-0.20, 0.75), 0.15, "inconclusive at this scale"),  # holds 0.37 but far wider
        ((0.10, 0.30), 0.15, "inconclusive at this scale"),  # straddles the edge
        ((np.nan, np.nan), 0.15, "inconclusive at this scale"),
    ],
)
def test_an_equivalence_verdict_needs_the_whole_interval_inside_or_outside(
    interval, margin, verdict
):
    estimate = v.Estimate(sum(interval) / 2, *interval, "test", seeds=5)
    found, why = v.judge(estimate, v.equal(0.37, margin))
    assert found == verdict and "test" in why


def test_a_verdict_waits_for_five_seeds_where_a_mean_or_ratio_is_the_finding():
    four = v.t_mean([0.36, 0.37, 0.38, 0.37])
    assert v.judge(four, v.equal(0.37, 0.15))[0] == "pending: 4 of 5 seeds"
    assert v.judge(v.t_mean([0.36, 0.37, 0.38, 0.37, 0.36]), v.equal(0.37, 0.15))[0] == "agrees"
    ratio = v.welch([10, 11, 12], [10, 11, 12, 10, 11], log=True)
    assert v.judge(ratio, v.same_ratio(1.5))[0] == "pending: 3 of 5 seeds"


def test_one_sided_claims_flip_with_the_data():
    low = v.t_mean([0.04, 0.05, 0.03, 0.04, 0.05])
    high = v.t_mean([0.6, 0.7, 0.65, 0.62, 0.68])
    assert v.judge(low, v.below(0.3))[0] == "agrees"
    assert v.judge(high, v.below(0.3))[0] == "disagrees"
    up = v.welch([0.9, 0.85, 0.88, 0.9, 0.87], [0.1, 0.12, 0.15, 0.11, 0.13])
    assert v.judge(up, v.above(0.0))[0] == "agrees"
    assert (
        v.judge(v.welch([0.1, 0.12, 0.15, 0.11, 0.13], [0.9, 0.85, 0.88, 0.9, 0.87]), v.above(0.0))[
            0
        ]
        == "disagrees"
    )
    noisy = v.welch([0.1, 0.9, 0.5, 0.2, 0.8], [0.4, 0.6, 0.5, 0.3, 0.7])
    assert v.judge(noisy, v.above(0.0))[0] == "inconclusive at this scale"


def law_runs(b, c, *, seeds=3, seed_sd=0.05, cell_sd=0.0, rng=None) -> pd.DataFrame:
    """Runs on the 3 x 3 grid from log10 U = 5 - b log B - c log C, with a random effect per
    cell (lack of fit) and seed noise, in log10 units."""
    rng = rng or np.random.default_rng(0)
    rows = []
    for B, C in CELLS:
        shift = rng.normal(0, cell_sd)
        for seed in range(seeds):
            log_u = 5 - b * np.log10(B) - c * np.log10(C) + shift + rng.normal(0, seed_sd)
            rows.append(
                {
                    "cell": f"B{B}-C{C}",
                    "B": B,
                    "C": C,
                    "seed": seed,
                    "updates": 10**log_u,
                    "censored": False,
                }
            )
    return pd.DataFrame(rows)


def test_the_cell_means_fit_recovers_the_exponents_and_its_df_counts_cells():
    fit = fits.cell_means_fit(law_runs(0.37, 0.62, seed_sd=0.0))
    assert fit["b"].value == pytest.approx(0.37) and fit["c"].value == pytest.approx(0.62)
    assert fit["df"] == 6 and "t df 6" in fit["b"].method and "3 seeds per cell" in fit["b"].method
    runs = law_runs(0.37, 0.62)
    corners = fits.cell_means_fit(runs[runs.B.isin([8, 32]) & runs.C.isin([32, 128])])
    assert (
        corners["df"] == 1 and corners["b"].high - corners["b"].low > fit["b"].high - fit["b"].low
    )


@pytest.mark.slow  # 200 simulated grids, a few seconds
def test_the_cell_means_interval_covers_despite_lack_of_fit():
    """Seed noise plus a cell effect: the t-interval on cell means keeps its 95%, where a
    per-run fit that treats runs as independent would not."""
    rng = np.random.default_rng(1)
    hits = [
        (lambda f: f["b"].low <= 0.37 <= f["b"].high)(
            fits.cell_means_fit(law_runs(0.37, 0.62, seed_sd=0.05, cell_sd=0.08, rng=rng))
        )
        for _ in range(200)
    ]
    assert 0.90 <= np.mean(hits) <= 0.99


def test_tobit_is_least_squares_without_censoring_and_corrects_the_bias_of_dropping():
    runs = law_runs(1.0, 0.1, seeds=5, seed_sd=0.1, rng=np.random.default_rng(3))
    plain = fits.censored_fit(runs)
    means = fits.cell_means_fit(runs)
    assert plain["b"].value == pytest.approx(means["b"].value, abs=1e-4)  # balanced: the same
    budget = np.quantile(runs.updates, 0.8)  # the slowest runs stop at a budget
    censored = runs.assign(censored=runs.updates > budget, updates=runs.updates.clip(upper=budget))
    modelled = fits.censored_fit(censored)["b"]
    dropped = fits.cell_means_fit(censored[~censored.censored])["b"]
    assert abs(modelled.value - 1.0) < abs(dropped.value - 1.0)
    assert modelled.low <= 1.0 <= modelled.high
    assert "runs censored" in modelled.method and "clustered" in modelled.method


def test_a_censored_cell_flips_the_context_verdict():
    """A cell whose runs all stop without a transition, at a budget 10x beyond where [A]'s
    law puts them: dropped, the rest agree with c = 0.62; modelled, c is pushed below it."""
    runs = law_runs(0.37, 0.62, seeds=5, seed_sd=0.02, rng=np.random.default_rng(4))
    late = runs.C == 128
    censored = runs.copy()
    censored.loc[late, "updates"] = runs.loc[runs.C == 32, "updates"].to_numpy() * 10
    censored.loc[late, "censored"] = True
    claim = v.equal(0.62, 0.15)
    assert v.judge(fits.cell_means_fit(runs)["c"], claim)[0] == "agrees"
    assert v.judge(fits.censored_fit(censored)["c"], claim)[0] == "disagrees"


def test_a_censored_ratio_models_the_censored_seeds_and_bounds_a_fully_censored_cell():
    base = [{"cell": "base", "updates": u, "censored": False} for u in (900, 1000, 1100, 950, 1050)]

    def cell(updates, censored):
        return [
            {"cell": "wide", "updates": u, "censored": c}
            for u, c in zip(updates, censored, strict=True)
        ]

    same = pd.DataFrame(base + cell([950, 1000, 1050, 1000, 1000], [False] * 5))
    assert v.judge(fits.censored_ratio(same, "wide", "base"), v.same_ratio())[0] == "agrees"
    stopped = pd.DataFrame(base + cell([3000, 3100, 3000, 3000, 3000], [False] + [True] * 4))
    assert v.judge(fits.censored_ratio(stopped, "wide", "base"), v.same_ratio())[0] == "disagrees"
    never = pd.DataFrame(base + cell([1300] * 5, [True] * 5))
    bound = fits.censored_ratio(never, "wide", "base")
    assert bound.high == np.inf and "every run of wide censored" in bound.method
    assert v.judge(bound, v.same_ratio())[0] == "inconclusive at this scale"  # 1.3x: may be 1
    far = pd.DataFrame(base + cell([30000] * 5, [True] * 5))
    assert v.judge(fits.censored_ratio(far, "wide", "base"), v.same_ratio())[0] == "disagrees"
    neither = far.assign(censored=True)  # no run of either cell placed: nothing to compare
    unknown = fits.censored_ratio(neither, "wide", "base")
    assert np.isnan(unknown.value) and "every run of wide and base censored" in unknown.method
    assert v.judge(unknown, v.same_ratio())[0] == "inconclusive at this scale"
    flipped = fits.censored_ratio(far, "base", "wide")  # the censored cell below: at most
    assert flipped.low == -np.inf and flipped.high == pytest.approx(-bound_of(far))
    assert flipped.text(".2f").startswith("at most 0.0") and "at most" not in bound.text()
    assert v.judge(flipped, v.same_ratio())[0] == "disagrees"
    partly = pd.DataFrame(
        cell([1000, 2000, 2100, 2200, 2300], [False] + [True] * 4)
        + [{"cell": "base", "updates": 900, "censored": True}] * 5
    )
    # the placed cell has censored runs too: its upper end is modelled (Tobit), not dropped
    assert "Tobit" in fits.censored_ratio(partly, "wide", "base").method


def bound_of(frame: pd.DataFrame) -> float:
    """log10 of the censored cell's least bound over the t upper end of base's mean."""
    base = np.log10(frame[frame.cell == "base"].updates)
    top = base.mean() + stats.t.ppf(0.975, len(base) - 1) * stats.sem(base)
    return float(np.log10(frame[frame.cell == "wide"].updates.min()) - top)


def test_a_censored_contrast_is_the_plain_one_without_censoring_and_keeps_censored_runs():
    rng = np.random.default_rng(3)
    names, means, weights = ["a", "b", "c", "d"], [3.9, 3.3, 3.9, 3.4], [1, -1, -1, 1]
    rows = [
        {"cell": n, "updates": 10 ** rng.normal(m, 0.05), "censored": False}
        for n, m in zip(names, means, strict=True)
        for _ in range(5)
    ]
    runs = pd.DataFrame(rows)
    plain = v.contrast([runs[runs.cell == n].updates for n in names], weights, log=True)
    tobit = fits.censored_contrast(runs, names, weights)
    assert tobit.value == pytest.approx(plain.value, abs=1e-6) and "Tobit" in tobit.method
    cut = runs.assign(censored=(runs.cell == "a") & (runs.updates > 10**3.9))
    cut["updates"] = np.where(cut.censored, 10**3.9, cut.updates)  # stopped at the budget
    dropped = v.contrast(
        [cut[(cut.cell == n) & ~cut.censored].updates for n in names], weights, log=True
    )
    kept = fits.censored_contrast(cut, names, weights)
    assert abs(kept.value - plain.value) < abs(dropped.value - plain.value)


def test_a_seed_count_target_is_met_missed_or_pending_by_the_counts():
    assert v.seed_target(4, 5)[0] == "meets the target"
    assert v.seed_target(4, 4)[0] == "meets the target"  # the fifth seed cannot undo it
    assert v.seed_target(3, 5)[0] == "misses the target"
    assert v.seed_target(1, 3)[0] == "misses the target"  # 1 + 2 to run < 4
    assert v.seed_target(2, 3)[0] == "pending: 3 of 5 seeds"
    assert "Clopper-Pearson, 3 seeds" in v.seed_target(2, 3)[1]


def test_a_contrast_of_four_cells_covers_its_true_value_at_its_level():
    """The difference of two b's: four cells of 5 seeds with unequal spreads; the Welch-
    Satterthwaite interval covers the true contrast about 95% of the time, and two groups give
    Welch's interval exactly."""
    rng = np.random.default_rng(0)
    means, sds, weights = np.array([3.9, 3.3, 3.9, 3.4]), [0.05, 0.2, 0.1, 0.05], [1, -1, -1, 1]
    truth, covered = float(np.dot(weights, means)), 0
    for _ in range(2000):
        groups = [rng.normal(m, s, 5) for m, s in zip(means, sds, strict=True)]
        e = v.contrast(groups, weights)
        covered += e.low <= truth <= e.high
    assert 0.93 <= covered / 2000 <= 0.97
    a, b = rng.normal(0, 1, 5), rng.normal(1, 2, 7)
    pair, welch = v.contrast([a, b], [1, -1]), v.welch(a, b)
    assert (pair.value, pair.low, pair.high) == (welch.value, welch.low, welch.high)
    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (pair.low, pair.high) == pytest.approx((interval.low, interval.high))


def test_a_tobit_fit_without_a_maximum_has_no_interval_and_no_verdict():
    """Three runs exactly on a plane of three coefficients, every other run censored below it:
    the likelihood grows as sigma shrinks, so there is no maximum to read an interval from."""
    rows = []
    for B in (1, 2, 4, 8, 16):
        for C in (64, 128, 256, 512):
            law = 750_000 / (B**0.37 * C**0.62)
            placed = (B, C) in [(1, 512), (2, 512), (2, 256)]
            rows.append(
                {"cell": f"{B}-{C}", "B": B, "C": C, "censored": not placed}
                | {"updates": law if placed else 0.8 * law}
            )
    fit = fits.censored_fit(pd.DataFrame(rows), clustered=False)
    assert "no maximum" in fit["b"].method and np.isnan(fit["b"].low)
    assert v.judge(fit["b"], v.equal(0.37, 0.15))[0] == "inconclusive at this scale"
    moved = pd.DataFrame(rows)
    moved.loc[moved.cell == "4-64", ["updates", "censored"]] = [30_000.0, False]  # off the plane
    fit = fits.censored_fit(moved, clustered=False)
    assert "no maximum" not in fit["b"].method and fit["b"].low < fit["b"].high


def test_a_profile_interval_is_the_wald_one_without_censoring_and_lopsided_with_it():
    from ihprobe.dynamics.censored import profile_interval, tobit

    rng = np.random.default_rng(5)
    x = np.linspace(0, 3, 40)
    X = np.column_stack([np.ones(40), x])
    y = 1 + 0.5 * x + 0.3 * rng.standard_normal(40)
    cut = stats.t.ppf(0.975, 38) ** 2
    low, high = profile_interval(y, X, np.zeros(40, bool), 1, cut)
    ols = stats.linregress(x, y)
    half = stats.t.ppf(0.975, 38) * ols.stderr
    assert (low, high) == pytest.approx((ols.slope - half, ols.slope + half), rel=0.05)
    bound = np.quantile(y, 0.4)  # most runs censored: the likelihood is lopsided
    censored = y > bound
    beta, *_ = tobit(np.minimum(y, bound), X, censored)
    low, high = profile_interval(np.minimum(y, bound), X, censored, 1, cut)
    assert low < beta[1] < high and not np.isclose(high - beta[1], beta[1] - low, rtol=0.05)


def test_a_ratio_of_one_run_a_cell_has_no_interval_and_waits_for_seeds():
    """Two runs, two coefficients: the fit passes through both and sigma collapses."""
    runs = pd.DataFrame(
        {"cell": ["a", "b"], "updates": [8_000.0, 5_000.0], "censored": [False, False]}
    )
    ratio = fits.censored_ratio(runs, "b", "a")
    assert 10**ratio.value == pytest.approx(5 / 8, rel=1e-3) and np.isnan(ratio.low)
    assert v.judge(ratio, v.same_ratio(1.5))[0] == "pending: 1 of 5 seeds"


def test_a_claim_of_several_parts_waits_on_the_part_furthest_behind():
    """judge_all reads the seed counts the parts carry, not their text: a pending part of a
    claim over cells ("12 of 16 cells") and one over seeds ("4 of 5 seeds") wait on the
    cells; the same parts judged with every seed run give the parts' own verdict."""
    import copy
    import pickle

    cells, seeds = (
        v.Pending(12, 16, "cells"),
        v.judge(v.Estimate(0.4, 0.3, 0.5, "t", 4, needs=5), v.equal(0.37, 0.15))[0],
    )
    assert isinstance(seeds, v.Pending) and (seeds.done, seeds.of) == (4, 5)
    assert (
        v.judge_all([(seeds, "a"), (cells, "b"), (v.AGREES, "c")])[0] == "pending: 12 of 16 cells"
    )
    assert v.judge_all([(v.Pending(1, 3), "a"), (seeds, "b")])[0] == "pending: 1 of 3 seeds"
    done = v.judge(v.Estimate(0.4, 0.3, 0.5, "t", 5, needs=5), v.equal(0.37, 0.15))
    assert v.judge_all([done, (v.DISAGREES, "d")])[0] == v.DISAGREES
    for again in (pickle.loads(pickle.dumps(cells)), copy.deepcopy(cells)):
        assert (
            isinstance(again, v.Pending) and again == cells and (again.done, again.of) == (12, 16)
        )


def test_a_tie_or_an_interval_that_reaches_the_edge_does_not_agree():
    """An interval whose end lies on the region's edge is not inside it (strict): a difference
    of exactly 0 (every seed alike) does not agree with "above 0"; identical runs do agree
    with "the same within 1.5x"; a bound toward an open side still agrees."""
    assert v.judge(v.welch([0.0] * 5, [0.0] * 5), v.above(0.0))[0] == v.INCONCLUSIVE
    assert v.judge(v.t_mean([1.0] * 5, log=True), v.same_ratio(1.5))[0] == v.AGREES
    touching = v.Estimate(0.05, 0.0, 0.1, "t", 5)
    assert v.judge(touching, v.above(0.0))[0] == v.INCONCLUSIVE
    assert v.judge(v.Estimate(0.05, 0.01, 0.1, "t", 5), v.above(0.0))[0] == v.AGREES
    assert v.judge(v.Estimate(0.3, 0.2, math.inf, "a bound", 5), v.above(0.0))[0] == v.AGREES
    assert v.judge(v.Estimate(0.3, 0.2, math.inf, "a bound", 5), v.below(1.0))[0] == v.INCONCLUSIVE
