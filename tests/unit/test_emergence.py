"""Change-point detection on curves with planted transitions, flat curves and noisy curves."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import emergence
from ihprobe.dynamics.curves import curve

# log-spaced checkpoints, two per doubling of tokens, after a step-0 checkpoint; B*C = 100
TOKENS = np.array([0] + [100 * round(100 * 2 ** (k / 2)) for k in range(24)])
SPACING = math.log10(2) / 2  # decades between checkpoints


def table(values, metric="prefix_matching", tokens=TOKENS) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": "run",
            "revision": None,
            "step": tokens // 100,
            "tokens": tokens,
            "layer": 0 if metric == "prefix_matching" else np.nan,
            "head": 0 if metric == "prefix_matching" else np.nan,
            "metric": metric,
            "value": values,
        }
    )


@pytest.mark.parametrize("k", [4, 9, 15, 20])
def test_step_is_located_between_the_checkpoints_where_it_jumps(k):
    values = np.where(np.arange(len(TOKENS)) <= k, 0.02, 0.85)
    p = emergence(table(values))
    assert p.transition
    assert (p.tokens_low, p.tokens_high) == (TOKENS[k], TOKENS[k + 1])
    assert TOKENS[k] <= p.tokens < TOKENS[k + 1]
    assert p.updates == pytest.approx(p.tokens / 100)  # steps interpolated: B*C = 100
    assert p.threshold == 0.3 and p.threshold_tokens == TOKENS[k + 1]
    assert p.threshold_step == TOKENS[k + 1] // 100
    assert p.rise == pytest.approx(0.83, abs=1e-6)


def _sigmoid(x0: float, width: float, noise: float, seed: int) -> np.ndarray:
    x = np.log10(np.maximum(TOKENS, 1))
    rng = np.random.default_rng(seed)
    return 0.03 + 0.8 / (1 + np.exp(-(x - x0) / width)) + noise * rng.standard_normal(len(x))


@pytest.mark.parametrize("width", [0.05, 0.15, 0.3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_sigmoid_knee_within_one_checkpoint(width, seed):
    x0 = 5.0 + 0.37 * seed
    p = emergence(table(_sigmoid(x0, width, noise=0.02, seed=seed)))
    assert p.transition
    # the steep segment of a logistic in log tokens starts about two widths before its centre
    assert abs(math.log10(p.tokens) - (x0 - 2 * width)) <= SPACING
    assert p.tokens_low <= p.tokens < p.tokens_high
    assert math.log10(p.tokens_high / p.tokens_low) == pytest.approx(SPACING, abs=5e-3)
    first_above = TOKENS[np.argmax(_sigmoid(x0, width, 0.02, seed) >= 0.3)]
    assert p.threshold_tokens == first_above


def test_flat_curve_reports_no_transition():
    p = emergence(table(np.full(len(TOKENS), 0.02)))
    assert not p.transition
    assert p.tokens is None and p.updates is None and p.step is None
    assert "never rises" in p.reason
    assert p.threshold_tokens is None


@pytest.mark.parametrize("seed", range(8))
def test_flat_noisy_curve_reports_no_transition(seed):
    values = 0.03 + 0.01 * np.random.default_rng(seed).standard_normal(len(TOKENS))
    assert not emergence(table(values)).transition
    # without the metric's floor it is the noise criterion that says no
    assert not emergence(table(values), min_rise=0).transition


def test_small_rise_below_floor_is_no_transition():
    values = np.where(np.arange(len(TOKENS)) <= 12, 0.02, 0.07)
    p = emergence(table(values))
    assert not p.transition and "min_rise" in p.reason
    assert emergence(table(values), min_rise=0.01).transition


def test_falling_metric_is_flipped():
    loss = np.where(np.arange(len(TOKENS)) <= 10, 4.7, 2.5)
    p = emergence(table(loss, metric="induction_loss"), "induction_loss")
    assert p.transition and (p.tokens_low, p.tokens_high) == (TOKENS[10], TOKENS[11])
    assert p.threshold == pytest.approx(3.6)  # half-way down the fitted drop
    assert p.threshold_tokens == TOKENS[11]
    flat = emergence(table(np.full(len(TOKENS), 4.7), "induction_loss"), "induction_loss")
    assert not flat.transition and "never falls" in flat.reason


def test_model_level_metric_and_batch_context_give_updates():
    acc = np.where(np.arange(len(TOKENS)) <= 7, 0.0, 0.9)
    steps = pd.array([None] * len(TOKENS), dtype="Int64")  # nullable, as trajectory() has it
    t = table(acc, metric="ar_accuracy").assign(step=steps)  # e.g. hub revisions
    p = emergence(t, "ar_accuracy", batch_size=4, context=25)
    assert p.transition and p.updates == pytest.approx(p.tokens / 100)
    assert p.step is None


def _per_head_table() -> pd.DataFrame:
    rows = []
    for i, tok in enumerate(TOKENS):
        for layer in range(2):
            for head in range(3):
                planted = (layer, head) == (1, 2) and i > 11
                rows.append((tok // 100, tok, layer, head, 0.9 if planted else 0.01 * head))
    frame = pd.DataFrame(rows, columns=["step", "tokens", "layer", "head", "value"])
    return frame.assign(model="run", revision=None, metric="prefix_matching")


def test_reduce_over_heads_or_one_head():
    frame = _per_head_table()
    assert curve(frame, reduce="max")["value"].iloc[-1] == 0.9
    assert curve(frame, reduce="mean")["value"].iloc[-1] == pytest.approx(
        (0.9 + 0.01 + 0.02 + 0.01) / 6
    )
    assert emergence(frame).tokens_low == TOKENS[11]
    assert emergence(frame, reduce=(1, 2)).tokens_low == TOKENS[11]
    assert not emergence(frame, reduce=(0, 2)).transition
    with pytest.raises(IhprobeError, match="reduce"):
        emergence(frame, reduce="median")


def test_user_errors():
    with pytest.raises(IhprobeError, match="too few"):
        emergence(table(np.zeros(5), tokens=TOKENS[:5]))
    with pytest.raises(IhprobeError, match="no 'ar_accuracy' rows"):
        emergence(table(np.zeros(len(TOKENS))), "ar_accuracy")
    with pytest.raises(IhprobeError, match="columns"):
        emergence(pd.DataFrame({"value": [1.0]}))


def test_result_serialises():
    p = ihprobe.emergence(table(np.where(np.arange(len(TOKENS)) <= 4, 0.02, 0.85)))
    d = p.to_dict()
    assert d["transition"] is True and d["tokens_low"] == TOKENS[4] and "curve" not in d
    assert p.to_frame().shape[0] == 1


def test_public_names_stay_functions_after_their_modules_are_imported():
    import ihprobe.dynamics.changepoint  # noqa: F401
    import ihprobe.dynamics.law  # noqa: F401

    assert callable(ihprobe.emergence) and callable(ihprobe.predict_emergence)
    assert callable(ihprobe.fit_law)


def test_steps_stand_in_for_unknown_tokens():
    values = np.where(np.arange(len(TOKENS)) <= 9, 0.02, 0.85)
    t = table(values).assign(tokens=pd.array([None] * len(TOKENS), dtype="Int64"))
    p = emergence(t)
    assert p.transition and (p.updates_low, p.updates_high) == (TOKENS[9] // 100, TOKENS[10] // 100)
    assert p.tokens is None and p.tokens_low is None
    with_shape = emergence(t, batch_size=4, context=25)
    assert with_shape.tokens == pytest.approx(with_shape.updates * 100)


def test_a_rise_seen_only_at_the_last_checkpoint_is_a_lower_bound_even_when_placed_early():
    steps = [0] + [int(100 * 1.3**k) for k in range(20)]
    flat = [0.02, 0.021, 0.018, 0.022, 0.02, 0.019, 0.021, 0.02, 0.018, 0.022, 0.02, 0.021, 0.019]
    flat += [0.02, 0.022, 0.018, 0.02, 0.019, 0.02]

    def point(tail):
        tokens = [s * 64 for s in steps]
        values = {"metric": "prefix_matching", "value": flat + tail}
        return emergence(pd.DataFrame({"step": steps, "tokens": tokens, **values}))

    only_last = point([0.028, 0.358])  # the fit starts this rise one interval before the last
    assert only_last.transition and only_last.updates_high < steps[-1]
    assert only_last.rise_at_last and only_last.at_edge
    seen_twice = point([0.30, 0.36])  # risen at the last two checkpoints: placed
    assert seen_twice.transition and not seen_twice.rise_at_last and not seen_twice.at_edge


# Linear checkpoints, as the natural-text runs save them (25 of them over 48M tokens, B*C = 100).
LINEAR = np.arange(25) * 2_000_000


@pytest.mark.parametrize("start", [8, 11, 14])
@pytest.mark.parametrize("seed", range(3))
def test_a_rise_that_goes_on_slower_is_placed_at_its_start(start, seed):
    """A steep segment of +0.09 followed by a slower +0.1 is one rise of 0.19 (the shape of the
    natural-text runs): placed at its start, not censored for its steep part alone."""
    k = np.arange(len(LINEAR))
    steep = np.clip((k - start) / 3, 0, 1) * 0.09
    slow = np.clip((k - start - 3) / (len(k) - start - 4), 0, 1) * 0.1
    noise = 0.002 * np.random.default_rng(seed).standard_normal(len(k))
    p = emergence(table(0.01 + steep + slow + noise, tokens=LINEAR))
    assert p.transition, p.reason
    assert LINEAR[start - 1] <= p.tokens <= LINEAR[start + 1]


@pytest.mark.parametrize("seed", range(4))
def test_a_late_small_uptick_is_still_censored(seed):
    """The same curve cut to its last three checkpoints' uptick of 0.02: below the floor."""
    k = np.arange(len(LINEAR))
    values = 0.007 + np.where(k >= 22, (k - 21) * 0.007, 0.0)
    values = values + 0.001 * np.random.default_rng(seed).standard_normal(len(k))
    p = emergence(table(values, tokens=LINEAR))
    assert not p.transition and "min_rise" in p.reason


# Two recorded natural-text seeds (max prefix matching of the live probes, by millions of tokens)
# whose rises a rule on the steep segment alone censored: d128-lr3e-3 seed 1 (B = 4, C = 256,
# extended to 3x the law) and d128-B16 seed 2 (B = 16, C = 256).
RECORDED = {
    (4, 256): "0.0: 0.014, 1.3: 0.013, 2.5: 0.011, 3.7: 0.009, 5.0: 0.008, 6.3: 0.008, 7.5: 0.007, "
    "8.8: 0.008, 10.0: 0.007, 11.2: 0.007, 12.5: 0.008, 13.8: 0.008, 15.0: 0.007, 16.2: 0.007, "
    "17.5: 0.008, 18.8: 0.008, 20.0: 0.008, 21.3: 0.007, 22.5: 0.007, 23.7: 0.007, 25.0: 0.008, "
    "26.3: 0.009, 27.5: 0.018, 28.7: 0.033, 30.0: 0.056, 31.3: 0.079, 32.5: 0.099, 33.8: 0.111, "
    "35.0: 0.124, 36.3: 0.136, 37.5: 0.134, 38.8: 0.157, 40.0: 0.174, 41.2: 0.166, 42.5: 0.183, "
    "43.8: 0.185, 44.3: 0.194",
    (16, 256): "0.0: 0.014, 2.0: 0.013, 4.0: 0.013, 6.0: 0.012, 8.0: 0.011, 10.0: 0.010, "
    "12.0: 0.010, 14.0: 0.010, 16.0: 0.010, 18.0: 0.010, 20.0: 0.010, 22.0: 0.021, 24.0: 0.060, "
    "26.0: 0.084, 28.0: 0.111, 30.0: 0.128, 32.0: 0.132, 34.0: 0.131, 36.0: 0.163, 38.0: 0.169, "
    "40.0: 0.175, 42.0: 0.179, 44.0: 0.185, 46.0: 0.209, 48.0: 0.206",
}


@pytest.mark.parametrize(
    "shape, low, high", [((4, 256), 25_000, 28_000), ((16, 256), 4_900, 5_600)]
)
def test_recorded_natural_rises_are_placed(shape, low, high):
    pairs = [item.split(": ") for item in RECORDED[shape].split(", ")]
    tokens = np.array([round(float(t) * 1e6) for t, _ in pairs])
    values = [float(v) for _, v in pairs]
    batch, context = shape
    t = table(values, tokens=tokens).assign(step=np.round(tokens / (batch * context)))
    p = emergence(t, batch_size=batch, context=context)
    assert p.transition, p.reason
    assert low <= p.updates <= high
