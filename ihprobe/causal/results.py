"""Results of causal ablation: top set vs random baselines, and every head alone.

Harm is a metric's change oriented by its direction in the metric table (lower accuracy,
higher loss or rank is positive harm). The statistics compare harms, never a ratio of two
signed numbers:

* ``p_value = (1 + #draws at least as harmful as the top set) / (R + 1)`` -- a permutation
  p-value, never below ``1 / (R + 1)``; ``p_distinct`` is the same over the distinct sets
  drawn (they differ when the baseline has fewer distinct sets than draws).
* load-bearing ``index = (top harm - mean random harm) / sd(random harm)`` over the distinct
  random sets (a set drawn twice counts once; fewer than two: NaN), with a percentile
  bootstrap 95% interval over them (columns ``load_bearing_index``, ``load_bearing_lo``,
  ``load_bearing_hi``).
* changes on the absolute scale (``change = ablated - clean``) and, for metrics whose clean
  value keeps its sign, the relative one (``relative_change = change / clean``); the ICL
  score, which can be near zero or change sign, is absolute only.
* one verdict, :meth:`AblationResult.verdict`, by the rule :data:`VERDICT_RULE`.

>>> result = ihprobe.ablate(model)                                          # doctest: +SKIP
>>> result.summary()[["metric", "change", "p_value", "load_bearing_index"]]  # doctest: +SKIP
>>> print(result.verdict())                                                 # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from einops import rearrange
from jaxtyping import Float

from ihprobe.core import checks
from ihprobe.io.provenance import COLUMNS, CarriesProvenance, Provenance, with_provenance
from ihprobe.probes.metrics import METRIC_TABLE

BOOTSTRAP = 2000  # resamples of the random draws for the index's interval
LOAD_BEARING_INDEX = 2.0  # top harm at least this many draw sds above the draws' mean
SIGNIFICANCE = 0.05  # largest p that counts as a difference from random heads
VERDICT_METRICS = ("ar_accuracy", "induction_loss", "icl_score", "ar_mean_rank")  # preferred
ANSWERS = ("no induction heads to test", "load-bearing", "signature only", "inconclusive")
VERDICT_RULE = (
    "No induction heads to test when no head of the top set reaches the ranking score's formed "
    f"threshold (prefix matching {METRIC_TABLE['prefix_matching'].threshold:g}): ablating the top "
    "set removes ordinary heads. Otherwise "
    f"load-bearing when p <= {SIGNIFICANCE} and the load-bearing index > {LOAD_BEARING_INDEX:g}; "
    f"a signature only when p > {SIGNIFICANCE} and the index's 95% interval lies below "
    f"{LOAD_BEARING_INDEX:g}; inconclusive otherwise. p is over the distinct random sets when the "
    "draws repeat sets (a small model has few), over all draws otherwise; the index is always "
    "over the distinct sets."
)


def metric_of(name: str):
    """The table entry of a result's metric name (``hits@1:copy_word`` is ``hits@1``)."""
    return METRIC_TABLE[name.split(":")[0]]


def changes(name: str, values: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(ablated - clean, (ablated - clean) / clean)`` of every group against group 0; the
    relative change is NaN for absolute-only metrics and a clean value of 0."""
    v = values.double().cpu().numpy()
    change = v - v[0]
    if not metric_of(name).relative or v[0] == 0:
        return change, np.full_like(v, np.nan)
    return change, change / v[0]


@dataclass
class AblationResult(CarriesProvenance):
    """Clean, top-ablated and random-ablated values of every metric, and the head sets used.

    ``values[metric]`` is a tensor ``[2 + R]``: clean, top set, then the ``R`` random draws;
    ``random_heads[r]`` lists the heads draw ``r`` ablated.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> result = ihprobe.ablate(model, heads=["L1H0"], batch=4, metrics=["induction_loss"])
        >>> result.top_heads, result.by, list(result.values)
        ([(1, 0)], 'prefix_matching', ['induction_loss'])
    """

    provenance: Provenance
    by: str
    scores: Float[torch.Tensor, "layer head"]
    top_heads: list[tuple[int, int]]
    random_heads: list[list[tuple[int, int]]]
    values: dict[str, Float[torch.Tensor, " group"]]
    settings: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return list(self.values)

    def __repr__(self) -> str:
        """One line: where from, the top set, the draws and the metrics (no tensors)."""
        top = ", ".join(f"L{layer}H{head}" for layer, head in self.top_heads)
        return (
            f"AblationResult({self.provenance.label}; top set by {self.by}: {top}; "
            f"{len(self.random_heads)} random draws; metrics: {', '.join(self.values)})"
        )

    def verdict(self, metric: str | None = None) -> Verdict:
        """Are the top heads load-bearing for ``metric`` (default: the first of
        ``VERDICT_METRICS`` measured)? One of :data:`ANSWERS`, by :data:`VERDICT_RULE`.

        Example:
            >>> v = ihprobe.ablate(model, scope="global", top=1).verdict()  # doctest: +SKIP
            >>> v.answer, str(v)                                            # doctest: +SKIP
            ('load-bearing', 'Ablating L1H3 changes ar_accuracy by -0.21 ...: load-bearing: ...')
        """
        if metric is None:
            metric = next((m for m in VERDICT_METRICS if m in self.values), self.metrics[0])
        checks.choice("metric", metric, list(self.values))  # verdict(""): not the default
        row = self.summary().set_index("metric").loc[metric]
        return Verdict(*_answer(self, row), metric=metric, numbers=_numbers(self, row, metric))

    def summary(self) -> pd.DataFrame:
        """One row per metric: clean, top and random values, changes, p-values and index."""
        seed = self.settings.get("seed", 0)
        return pd.DataFrame(
            [statistics(m, v, self.random_heads, seed=seed) for m, v in self.values.items()]
        )

    def to_frame(self) -> pd.DataFrame:
        """The long table ``model, revision, step, tokens, layer, head, metric, value``.

        Model-level rows (layer and head empty) hold ``{metric}.{statistic}`` for every
        column of :meth:`summary`; head rows hold the score ``by``, ``top_set`` (1 for heads
        in the top set) and ``random_set`` (how many random draws picked the head).
        """
        rows = []
        for stats in self.summary().to_dict("records"):
            metric = stats.pop("metric")
            rows += [(None, None, f"{metric}.{k}", float(v)) for k, v in stats.items()]
        picked = torch.zeros_like(self.scores)
        for draw in self.random_heads:
            for layer, head in draw:
                picked[layer, head] += 1
        top = set(self.top_heads)
        n_layers, n_heads = self.scores.shape
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append((layer, head, self.by, float(self.scores[layer, head])))
                rows.append((layer, head, "top_set", float((layer, head) in top)))
                rows.append((layer, head, "random_set", float(picked[layer, head])))
        return with_provenance(pd.DataFrame(rows, columns=list(COLUMNS[4:])), self.provenance)


@dataclass(frozen=True)
class Verdict:
    """The answer (one of :data:`ANSWERS`), why, and the numbers behind it; ``str()`` is the
    whole sentence."""

    answer: str
    reason: str
    metric: str
    numbers: str

    def __str__(self) -> str:
        return f"{self.numbers}: {self.answer}: {self.reason}."


def _answer(result: AblationResult, row) -> tuple[str, str]:
    """``(answer, reason)`` of one metric's summary row, by :data:`VERDICT_RULE`."""
    s = result.settings
    threshold = METRIC_TABLE[result.by].threshold if result.by in METRIC_TABLE else None
    best = max(float(result.scores[layer, head]) for layer, head in result.top_heads)
    if threshold is not None and best < threshold:
        return ANSWERS[0], (
            f"the top set's best {result.by} is {best:.3g}, below the {threshold:g} that counts "
            "as formed, so these are ordinary heads"
        )
    p = row.p_distinct if s.get("draws_repeat") else row.p_value
    if p <= SIGNIFICANCE and row.load_bearing_index > LOAD_BEARING_INDEX:
        return ANSWERS[1], "the model depends on these heads more than on random ones"
    if p > SIGNIFICANCE and row.load_bearing_hi < LOAD_BEARING_INDEX:
        return ANSWERS[2], "removing them costs no more than removing random heads"
    if s.get("draws_repeat") and row.p_value <= SIGNIFICANCE:
        drawn = int(row.distinct_sets)
        exist = int(s.get("distinct_sets") or drawn)
        of = "" if drawn == exist else f" ({drawn} of them drawn)"
        return ANSWERS[3], (
            f"only {exist} distinct random sets exist{of}, too few for a permutation test to "
            "tell these heads from random ones"
        )
    return ANSWERS[3], "the numbers meet neither rule at this number of draws and rows"


def _numbers(result: AblationResult, row, metric: str) -> str:
    """The change, the draws and the statistics the verdict reads, in one clause."""
    s = result.settings
    heads = ", ".join(f"L{layer}H{head}" for layer, head in result.top_heads)
    draws = f"{len(result.random_heads)} {s.get('baseline', 'layer-matched')} random draws"
    repeat = s.get("draws_repeat")
    if repeat:  # the table's distinct_sets (drawn) first, then how many exist when more do
        drawn, exist = int(row.distinct_sets), s.get("distinct_sets")
        draws += f" (only {drawn} distinct sets" + (
            f" drawn, of {exist} that exist)" if exist and exist != drawn else ")"
        )
    return (
        f"Ablating {heads} changes {metric} by {row.change:+.3g} (random draws: "
        f"{row.random_change_mean:+.3g} on average; {draws}; p = {row.p_value:.2g}"
        + (f", over the distinct sets {row.p_distinct:.2g}" if repeat else "")
        + f", load-bearing index {row.load_bearing_index:.2g} "
        f"(95% interval {row.load_bearing_lo:.2g} to {row.load_bearing_hi:.2g}))"
    )


def statistics(
    metric: str,
    values: torch.Tensor,
    draws: list[list[tuple[int, int]]] | None = None,
    *,
    seed: int = 0,
    bootstrap: int = BOOTSTRAP,
) -> dict:
    """The statistics of one metric's ``[clean, top, random...]`` values (module docstring)."""
    change, relative = changes(metric, values)
    harm = metric_of(metric).harm_sign * change
    top, random = harm[1], harm[2:]
    draws = draws or [[(r, r)] for r in range(len(random))]  # unknown sets: all distinct
    distinct = {tuple(d): h for d, h in zip(draws, random, strict=True)}
    unique = np.array(list(distinct.values()))
    # each distinct set once: draws that repeat a set add no spread (one set alone: no index)
    index, lo, hi = load_bearing_index(top, unique, seed=seed, bootstrap=bootstrap)
    v = values.double().cpu().numpy()
    return {
        "metric": metric,
        "clean": v[0],
        "top": v[1],
        "random_mean": v[2:].mean(),
        "change": change[1],
        "relative_change": relative[1],
        "random_change_mean": change[2:].mean(),
        "random_change_sd": change[2:].std(ddof=1) if len(random) > 1 else math.nan,
        "random_change_lo": np.quantile(change[2:], 0.025),
        "random_change_hi": np.quantile(change[2:], 0.975),
        "random_relative_change_mean": relative[2:].mean(),
        "random_relative_change_lo": np.quantile(relative[2:], 0.025),
        "random_relative_change_hi": np.quantile(relative[2:], 0.975),
        "p_value": permutation_p(top, random),
        "p_distinct": permutation_p(top, unique),
        "distinct_sets": len(unique),
        "load_bearing_index": index,
        "load_bearing_lo": lo,
        "load_bearing_hi": hi,
    }


def permutation_p(top: float, draws: np.ndarray) -> float:
    """(1 + draws at least as harmful as the top set) / (draws + 1), never below 1 / (R + 1);
    a draw whose harm is undefined (NaN) is left out rather than counted as less harmful, and
    an undefined top harm has no p.

    >>> permutation_p(2.0, np.array([1.0, 3.0, np.nan])), permutation_p(9.0, np.array([1.0]))
    (0.6666666666666666, 0.5)
    >>> math.isnan(permutation_p(math.nan, np.array([1.0, 2.0])))
    True
    """
    draws = np.asarray(draws, float)
    draws = draws[~np.isnan(draws)]
    if math.isnan(top):
        return math.nan
    return (1 + int((draws >= top).sum())) / (len(draws) + 1)


def load_bearing_index(
    top: float, random: np.ndarray, *, seed: int = 0, bootstrap: int = BOOTSTRAP
) -> tuple[float, float, float]:
    """``(top - mean(random)) / sd(random)`` of harms, and its percentile-bootstrap 95% interval
    (random draws resampled with replacement, ``seed``-ed). With sd 0 (every draw equally
    harmful) it is +-inf when the top set differs and NaN when it does not; when some resamples
    are infinite the bounds are order statistics of the resamples (interpolating between two
    infinities is undefined), so an interval can reach +-inf but is never NaN.

    >>> index, lo, hi = load_bearing_index(12.0, np.arange(10.0))
    >>> round(index, 2), lo < index < hi
    (2.48, True)
    """
    if len(random) < 2:
        return math.nan, math.nan, math.nan
    index = float(_index(top, random[None])[0])
    samples = random[np.random.default_rng(seed).integers(0, len(random), (bootstrap, len(random)))]
    boot = _index(top, samples)
    if np.isnan(boot).all():
        return index, math.nan, math.nan
    method = "inverted_cdf" if np.isinf(boot).any() else "linear"
    lo, hi = np.nanquantile(boot, [0.025, 0.975], method=method)
    return index, float(lo), float(hi)


def _index(top: float, harms: np.ndarray) -> np.ndarray:
    """The index of each row of ``harms``: +-inf when the draws agree (sd 0, up to rounding:
    three copies of 0.1 have a float sd of 1.7e-17) and the top set differs from them, NaN when
    it equals them too.

    >>> _index(0.0, np.array([[0.1, 0.1, 0.1], [0.0, 0.1, 0.2]])).round(6).tolist()
    [-inf, -1.0]
    """
    excess, sd = top - harms.mean(axis=1), harms.std(axis=1, ddof=1)
    rounding = 1e-12 * np.maximum(np.abs(harms).max(axis=1), abs(top))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            sd > rounding,
            excess / sd,
            np.sign(excess) * np.where(np.abs(excess) > rounding, np.inf, np.nan),
        )


@dataclass
class HeadEffects(CarriesProvenance):
    """Every head ablated alone: ``values[metric]`` is ``[1 + layers * heads]``, the clean
    value then one per head, layer-major.

    >>> effects = ihprobe.head_effects(model, metrics=["ar_accuracy"])      # doctest: +SKIP
    >>> effects.ranking("ar_accuracy")[:2]      # most harmful heads first   # doctest: +SKIP
    [(1, 2, 0.91), (0, 3, 0.12)]
    """

    provenance: Provenance
    shape: tuple[int, int]
    values: dict[str, Float[torch.Tensor, " group"]]
    settings: dict = field(default_factory=dict)

    def change(self, metric: str) -> Float[torch.Tensor, "layer head"]:
        """``ablated - clean`` of every head."""
        checks.choice("metric", metric, list(self.values))  # ranking("bogus"): one line
        v = self.values[metric].double()
        return rearrange(v[1:] - v[0], "(layer head) -> layer head", layer=self.shape[0])

    def harm(self, metric: str) -> Float[torch.Tensor, "layer head"]:
        """The change oriented so that positive is worse (the metric table's direction)."""
        checks.choice("metric", metric, list(self.values))
        return metric_of(metric).harm_sign * self.change(metric) + 0.0  # no -0.0

    def ranking(self, metric: str) -> list[tuple[int, int, float]]:
        """``(layer, head, harm)`` of every head, most harmful first (ties: lower index)."""
        harm = self.harm(metric).flatten()
        order = torch.sort(-harm, stable=True).indices
        n_heads = self.shape[1]
        return [(int(i) // n_heads, int(i) % n_heads, float(harm[i])) for i in order]

    def to_frame(self) -> pd.DataFrame:
        """The tidy table ``model, revision, step, tokens, layer, head, metric, clean,
        ablated, change, relative_change, harm``: one row per head and metric."""
        n_layers, n_heads = self.shape
        frames = []
        for metric, values in self.values.items():
            change, relative = changes(metric, values)
            v = values.double().cpu().numpy()
            frames.append(
                pd.DataFrame(
                    {
                        "layer": np.repeat(np.arange(n_layers), n_heads),
                        "head": np.tile(np.arange(n_heads), n_layers),
                        "metric": metric,
                        "clean": v[0],
                        "ablated": v[1:],
                        "change": change[1:],
                        "relative_change": relative[1:],
                        "harm": metric_of(metric).harm_sign * change[1:] + 0.0,
                    }
                )
            )
        frame = pd.concat(frames, ignore_index=True)
        p = self.provenance
        frame.insert(0, "model", p.model)
        frame.insert(1, "revision", p.revision)
        frame.insert(2, "step", pd.array([p.step] * len(frame), dtype="Int64"))
        frame.insert(3, "tokens", pd.array([p.tokens] * len(frame), dtype="Int64"))
        return frame

    def to_long(self) -> pd.DataFrame:
        """The long table :data:`~ihprobe.probes.scores.COLUMNS`: ``{metric}.head_change`` per head
        and ``{metric}.clean`` per model, so checkpoints concatenate with other results."""
        tidy = self.to_frame()
        heads = tidy[["layer", "head"]].assign(
            metric=tidy.metric + ".head_change", value=tidy.change
        )
        clean = pd.DataFrame(
            {
                "layer": None,
                "head": None,
                "metric": [f"{m}.clean" for m in self.values],
                "value": [float(v[0]) for v in self.values.values()],
            }
        )
        return with_provenance(pd.concat([heads, clean], ignore_index=True), self.provenance)
