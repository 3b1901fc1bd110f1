"""The claim grammar: estimates with named intervals, pre-declared regions, verdicts.

Every study (``lab/studies/``) estimates and judges through this module and the law's fits over
seeds and cells (:mod:`ihprobe.dynamics.law`):

* **a quantity measured per seed**: the mean with a Student-t 95% interval (df = seeds - 1),
  never a percentile bootstrap of a handful of seeds (with 3 seeds: [min, max], 74% coverage);
* **a ratio of two cells**, or a contrast of several (the difference of two b's): Welch(-
  Satterthwaite) t on their mean log10 values (a ratio of geometric means);
* **an exponent** of ``U = T / (B^b C^c)`` and **censored runs**: the law's fits
  (:func:`ihprobe.dynamics.law.cell_means_fit`, ``censored_fit``, ``censored_ratio``);
* a cell mean or a ratio is a finding only with ``MIN_SEEDS`` seeds per cell, else its verdict
  is ``"pending: n of 5 seeds"`` (a fit on cell means needs no such floor: its df count cells);
* every claim has a pre-declared region (a value +- an equivalence margin, or a one-sided
  bound); ``"agrees"`` only when the whole interval lies inside it, ``"disagrees"`` only when it
  lies wholly outside, otherwise ``"inconclusive at this scale"``;
* every interval prints with its method and its seed count (:meth:`Estimate.text`).

>>> e = t_mean([0.30, 0.34, 0.38, 0.36, 0.32])
>>> e.text(".2f")
'0.34 [0.30, 0.38] (t, 5 seeds)'
>>> judge(e, equal(0.37, 0.15))
('agrees', '0.34 [0.301, 0.379] (t, 5 seeds) lies inside 0.37 +- 0.15')
>>> judge(t_mean([0.30, 0.34, 0.38]), equal(0.37, 0.15))[0]
'pending: 3 of 5 seeds'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_SEEDS = 5  # seeds per cell behind a cell mean or a ratio that is reported as a finding
LEVEL = 0.95
AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive at this scale"


@dataclass(frozen=True)
class Estimate:
    """A value with its 95% interval, how the interval was made and the seeds behind it.

    ``seeds`` is the fewest seeds in any cell it rests on; ``needs`` the seeds its verdict
    waits for; ``log10`` marks a log10 ratio, printed as the ratio itself.

    >>> Estimate(-4.5, -4.5, math.inf, "a bound", 1, log10=True).text(".2f")
    'at least 3.2e-05 (a bound)'
    >>> Estimate(-400, -400, math.inf, "far", 1, log10=True).text(".2f")
    'at least 1e-400 (far)'
    >>> Estimate(1e-4, 5e-5, 2e-4, "a share", 9).text(".1%")
    '0.01% [0.005%, 0.02%] (a share)'
    >>> Estimate(0.5, -math.inf, math.inf, "a profile", 1).text(".2f")
    '0.50 (a profile; no bound either way)'
    """

    value: float
    low: float
    high: float
    method: str
    seeds: int
    needs: int = 1
    log10: bool = False

    def text(self, spec: str = ".3g") -> str:
        """``value [low, high] (method)``; ``value (method; no interval)`` when it has none."""

        def show(x: float) -> str:  # a nonzero value that rounds to 0 keeps 2 significant digits
            value = 10**x if self.log10 else x
            if value == 0 and self.log10:  # below the smallest float
                return f"1e{x:.0f}"
            shown = f"{value:{spec}}"
            if value == 0 or shown.strip("-+0.,%"):
                return shown
            return f"{value * 100:.2g}%" if spec.endswith("%") else f"{value:.2g}"

        if not np.isfinite(self.value):
            return f"none ({self.method})"
        if np.isnan(self.low) or np.isnan(self.high):
            return f"{show(self.value)} ({self.method}; no interval)"
        if self.high == math.inf and self.low == -math.inf:
            return f"{show(self.value)} ({self.method}; no bound either way)"
        if self.high == math.inf or self.low == -math.inf:
            edge, which = (self.low, "least") if self.high == math.inf else (self.high, "most")
            return f"at {which} {show(edge)} ({self.method})"
        return f"{show(self.value)} [{show(self.low)}, {show(self.high)}] ({self.method})"


class Pending(str):
    """The verdict of a claim still waiting for seeds (or cells): reads ``"pending: n of m
    seeds"`` like any verdict and keeps ``done`` and ``of`` for :func:`judge_all`.

    >>> p = Pending(3, 5)
    >>> p, p.done, p.of, Pending(9, 16, "cells", " (two cells left)")
    ('pending: 3 of 5 seeds', 3, 5, 'pending: 9 of 16 cells (two cells left)')
    """

    def __new__(cls, done: int, of: int = MIN_SEEDS, unit: str = "seeds", note: str = ""):
        self = super().__new__(cls, f"pending: {int(done)} of {int(of)} {unit}{note}")
        self.done, self.of, self._args = int(done), int(of), (done, of, unit, note)
        return self

    def __getnewargs__(self):  # pickles and copies as a Pending, not as its text
        return self._args


def seeds_text(n: int, unit: str = "seed") -> str:
    """``1 seed``, ``5 seeds``; ``unit="run"`` where the values are runs of several cells."""
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _finite(values) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)


def t_mean(values, *, log: bool = False, needs: int = MIN_SEEDS, unit: str = "seed") -> Estimate:
    """Mean over seeds and its Student-t 95% interval (none below 2 seeds); ``log``: of the
    log10 values (a geometric mean, printed as such); ``unit`` names what was counted.

    >>> t_mean([1.0, 2.0, 3.0]).text(".3f"), t_mean([100, 200, 400], log=True).text(".0f")
    ('2.000 [-0.484, 4.484] (t, 3 seeds)', '200 [36, 1119] (t on log10, 3 seeds)')
    """
    x = _finite(values)
    if log:
        x = np.log10(x[x > 0])
    n, how = len(x), "t on log10" if log else "t"
    if n < 2:
        value = float(x[0]) if n else np.nan
        return Estimate(value, np.nan, np.nan, f"{how}, {seeds_text(n, unit)}", n, needs, log)
    half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
    mean = float(x.mean())
    return Estimate(mean, mean - half, mean + half, f"{how}, {seeds_text(n, unit)}", n, needs, log)


def welch(a, b, *, log: bool = False, needs: int = MIN_SEEDS) -> Estimate:
    """mean(a) - mean(b) with Welch's t 95% interval; ``log``: of log10 values, so the
    estimate is log10 of the ratio of geometric means (printed as the ratio).

    >>> welch([4.0, 4.2, 3.8], [2.0, 2.1, 1.9], log=True).text(".2f")
    '2.00 [1.79, 2.24] (Welch t on log10, 3 and 3 seeds)'
    """
    return contrast([a, b], [1, -1], log=log, needs=needs)


def contrast(groups, weights, *, log: bool = False, needs: int = MIN_SEEDS) -> Estimate:
    """sum_i w_i mean(group_i) with a Welch-Satterthwaite t 95% interval (``log``: of log10
    values); weights (1, -1, -1, 1) give a difference of two differences, e.g. of two b's.

    >>> contrast([[3.0, 3.1], [2.0, 2.2], [3.0, 3.2], [1.5, 1.5]], [1, -1, -1, 1]).text(".2f")
    '-0.65 [-1.19, -0.11] (Welch t, 2, 2, 2 and 2 seeds)'
    """
    xs = [_finite(g) for g in groups]
    if log:
        xs = [np.log10(x[x > 0]) for x in xs]
    ns = [len(x) for x in xs]
    counts = ", ".join(map(str, ns[:-1])) + " and " * (len(ns) > 1) + str(ns[-1])
    how, seeds = f"Welch t{' on log10' if log else ''}, {counts} seeds", min(ns)
    value = float(sum(w * x.mean() for w, x in zip(weights, xs, strict=True))) if seeds else np.nan
    if seeds < 2:
        return Estimate(value, np.nan, np.nan, how, seeds, needs, log)
    parts = [w**2 * x.var(ddof=1) / len(x) for w, x in zip(weights, xs, strict=True)]
    se = math.sqrt(sum(parts))
    if se == 0:
        return Estimate(value, value, value, how, seeds, needs, log)
    df = sum(parts) ** 2 / sum(v**2 / (n - 1) for v, n in zip(parts, ns, strict=True))
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * se
    return Estimate(value, value - half, value + half, how, seeds, needs, log)


def proportion(successes: int, n: int, unit: str = "seed") -> Estimate:
    """A share of ``n`` seeds (or other ``unit``) with its Clopper-Pearson 95% interval.

    >>> proportion(4, 5).text(".2f"), proportion(1, 30, unit="run").method
    ('0.80 [0.28, 0.99] (Clopper-Pearson, 5 seeds)', 'Clopper-Pearson, 30 runs')
    """
    method = f"Clopper-Pearson, {seeds_text(n, unit)}"
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, method, 0)
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(LEVEL, method="exact")
    return Estimate(successes / n, ci.low, ci.high, method, n)


def family_note(claims: int | None = None) -> str:
    """The sentence a results file with several verdicts carries: each reads its own 95%
    interval, with no correction across them.

    >>> family_note(12).split(":")[0]
    'Each of these 12 verdicts reads its own 95% interval, with no correction across them'
    """
    which = f"Each of these {claims} verdicts" if claims else "Each verdict here"
    return (
        f"{which} reads its own 95% interval, with no correction across them: about 1 in 20 "
        "intervals misses its true value by chance alone, so a single disagrees among many is "
        "weak evidence."
    )


def holm(p_values) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given): p_(i) times
    the tests not yet passed, made monotone; a family-wise 5% where each adjusted p < 0.05.

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, float)
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))))
    out = np.empty_like(p)
    out[order] = adjusted
    return out.tolist()


def seed_target(successes: int, done: int, target: int = 4, of: int = MIN_SEEDS) -> tuple[str, str]:
    """(verdict, why) for a target stated as a count of seeds, e.g. "a head forms in at least 4 of
    5 seeds": ``"meets the target"`` or ``"misses the target"`` once ``of`` seeds are done, or
    earlier when the seeds still to run cannot change it; otherwise ``"pending: n of 5 seeds"``.

    >>> seed_target(4, 5)[0], seed_target(3, 5)[0], seed_target(1, 3)[0], seed_target(2, 3)[0]
    ('meets the target', 'misses the target', 'misses the target', 'pending: 3 of 5 seeds')
    """
    share = proportion(successes, done).text(".2f")
    why = f"{successes} of {done} seeds ({share}); target at least {target} of {of}"
    if successes >= target:
        return "meets the target", why
    if successes + (of - done) < target:
        return "misses the target", why
    return Pending(done, of), why


# ----------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class Claim:
    """The region a claim says the value lies in, declared before looking at the data."""

    low: float
    high: float
    says: str  # e.g. "0.37 +- 0.15", "within 1.5x either way", "above 0"


def equal(target: float, margin: float) -> Claim:
    """The value equals ``target`` within +- ``margin`` (an equivalence margin)."""
    return Claim(target - margin, target + margin, f"{target:g} +- {margin:g}")


def same_ratio(factor: float = 1.5) -> Claim:
    """Two quantities are the same within ``factor`` either way (for a log10 ratio)."""
    return Claim(-math.log10(factor), math.log10(factor), f"within {factor:g}x either way")


def above(bound: float) -> Claim:
    """The value exceeds ``bound`` (e.g. a difference above 0)."""
    return Claim(bound, math.inf, f"above {bound:g}")


def below(bound: float) -> Claim:
    """The value stays below ``bound``."""
    return Claim(-math.inf, bound, f"below {bound:g}")


def judge(estimate: Estimate, claim: Claim, *, final: bool = False) -> tuple[str, str]:
    """(verdict, why): ``"agrees"`` when the whole interval lies inside the claim's region,
    ``"disagrees"`` when it lies wholly outside, ``"inconclusive at this scale"`` otherwise or
    without an interval, ``"pending: n of 5 seeds"`` below the seeds the estimate needs, unless
    ``final`` (every seed has run, so the values missing are undefined, not to come):
    inconclusive.

    >>> claim = equal(0.37, 0.15)
    >>> far, wide = Estimate(0.9, 0.8, 1.0, "m", 9), Estimate(0.4, 0.1, 0.7, "m", 9)
    >>> judge(far, claim)[0], judge(wide, claim)[0]
    ('disagrees', 'inconclusive at this scale')
    >>> short = Estimate(0.9, 0.8, 1.0, "m", 4, needs=5)
    >>> judge(short, claim)[0], judge(short, claim, final=True)[0]
    ('pending: 4 of 5 seeds', 'inconclusive at this scale')
    >>> judge(welch([0.0] * 5, [0.0] * 5), above(0))[0]   # a tie at the edge
    'inconclusive at this scale'
    """
    shown = estimate.text(".3g" if not estimate.log10 else ".2f")
    if estimate.seeds < estimate.needs and final:
        return INCONCLUSIVE, f"{shown} has fewer than {estimate.needs} defined values"
    if estimate.seeds < estimate.needs:
        return Pending(estimate.seeds, estimate.needs), f"{shown} needs more seeds"
    lo, hi = estimate.low, estimate.high
    if np.isnan(lo) or np.isnan(hi):
        return INCONCLUSIVE, f"{shown}: no interval to judge"
    # strictly inside: an interval that reaches the region's edge is not inside it (a tie at
    # the edge, e.g. a difference of exactly 0 against "above 0", does not agree)
    if (claim.low == -math.inf or claim.low < lo) and (claim.high == math.inf or hi < claim.high):
        return AGREES, f"{shown} lies inside {claim.says}"
    if hi < claim.low or lo > claim.high:
        return DISAGREES, f"{shown} lies wholly outside {claim.says}"
    return INCONCLUSIVE, f"{shown} straddles the edge of {claim.says}"


def judge_all(parts: list[tuple[str, str]]) -> tuple[str, str]:
    """The verdict of a claim made of several parts, each judged by :func:`judge`: pending
    while any part is, ``"agrees"`` when every part agrees, ``"disagrees"`` when any part
    disagrees, otherwise inconclusive; the reasons joined.

    >>> judge_all([("agrees", "a"), ("disagrees", "b")])
    ('disagrees', 'a; b')
    >>> judge_all([("agrees", "a"), ("inconclusive at this scale", "b")])[0]
    'inconclusive at this scale'
    >>> judge_all([(Pending(2, 5), "a"), (Pending(1, 5), "b"), ("agrees", "c")])[0]
    'pending: 1 of 5 seeds'
    """
    verdicts, why = [v for v, _ in parts], "; ".join(w for _, w in parts)
    pending = [v for v in verdicts if isinstance(v, Pending)]
    if pending:  # the part furthest behind: "pending: 1 of 5 seeds" before "2 of 5"
        return min(pending, key=lambda v: v.done / v.of), why
    if all(v == AGREES for v in verdicts):
        return AGREES, why
    return (DISAGREES if DISAGREES in verdicts else INCONCLUSIVE), why
