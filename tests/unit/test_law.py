"""The law: predictions against hand computation and known values; refits recover known laws."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.law import LAWS, Law, fit_law, predict_emergence


@pytest.mark.parametrize(
    ("B", "C", "about"),
    [(4, 64, 34_000), (16, 64, 20_000), (1024, 2048, 500)],  # the law's own values for these shapes
)
def test_fitted_law_matches_spec_and_hand_computation(B, C, about):
    p = ihprobe.predict_emergence(B, C)
    by_hand = 750_000 / (math.exp(0.37 * math.log(B)) * math.exp(0.62 * math.log(C)))
    assert p.updates == pytest.approx(by_hand, rel=1e-12)
    assert p.updates == pytest.approx(about, rel=0.03)
    assert p.tokens == pytest.approx(by_hand * B * C, rel=1e-12)


def test_hand_computed_values_to_the_unit():
    # computed with bc -l: 4^0.37 = 1.6701758, 64^0.62 = 13.1774563, 16^0.37 = 2.7894873,
    # 1024^0.37 * 2048^0.62 = 1468.37
    assert predict_emergence(4, 64).updates == pytest.approx(34077.48, abs=0.01)
    assert predict_emergence(16, 64).updates == pytest.approx(20403.53, abs=0.01)
    assert predict_emergence(1024, 2048).updates == pytest.approx(510.77, abs=0.01)


def test_sqrt_law_is_in_tokens():
    p = predict_emergence(4, 64, law="sqrt")
    assert p.tokens == pytest.approx(10**5.7 * 16, rel=1e-12)  # sqrt(4 * 64) = 16
    assert p.updates == pytest.approx(10**5.7 * 16 / 256, rel=1e-12)
    assert p.to_dict()["law"] == "sqrt"


def test_constants_can_be_overridden():
    p = predict_emergence(8, 32, T=1e5, b=0.5, c=1.0)
    assert p.updates == pytest.approx(1e5 / (math.sqrt(8) * 32))
    assert "T=100000" in p.law.name
    assert predict_emergence(8, 32, law=Law(2e5, 0.0, 1.0)).updates == pytest.approx(2e5 / 32)


def test_bad_inputs_say_what_to_do():
    with pytest.raises(IhprobeError, match="fitted"):
        predict_emergence(4, 64, law="cubic")
    with pytest.raises(IhprobeError, match="positive"):
        predict_emergence(0, 64)


def _grid_points(law: Law, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        (B, C, law.updates(B, C) * math.exp(noise * rng.standard_normal()))
        for B in (2, 4, 8, 16, 32, 64)
        for C in (16, 32, 64, 128, 256)
    ]


def test_fit_recovers_exact_law():
    fit = fit_law(_grid_points(LAWS["fitted"], noise=0.0))
    assert fit.b == pytest.approx(0.37, abs=1e-9)
    assert fit.c == pytest.approx(0.62, abs=1e-9)
    assert fit.T == pytest.approx(750_000, rel=1e-9)
    assert fit.r == pytest.approx(1.0)
    assert np.abs(fit.residuals).max() < 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_known_exponents_under_noise(seed):
    truth = Law(T=2e5, b=0.25, c=0.8)
    fit = fit_law(_grid_points(truth, noise=0.1, seed=seed))  # 10% multiplicative noise
    assert fit.b == pytest.approx(0.25, abs=4 * fit.stderr["b"] + 1e-3)
    assert fit.c == pytest.approx(0.8, abs=4 * fit.stderr["c"] + 1e-3)
    assert abs(fit.b - 0.25) < 0.06 and abs(fit.c - 0.8) < 0.06
    assert fit.T == pytest.approx(2e5, rel=0.5)
    assert fit.r > 0.98
    assert np.std(fit.residuals) == pytest.approx(0.1 / math.log(10), rel=0.5)
    frame = fit.to_frame()
    assert list(frame.columns) == [
        "batch_size",
        "context",
        "updates",
        "censored",
        "predicted",
        "residual_log10",
    ]
    assert fit.predict(16, 64).updates == pytest.approx(fit.T / (16**fit.b * 64**fit.c))


def test_fixed_exponent_when_one_batch_size():
    points = [(8, C, LAWS["fitted"].updates(8, C)) for C in (32, 64, 128)]
    with pytest.raises(IhprobeError, match=r"same batch size.*fit_law\(points, b=0.37\)"):
        fit_law(points)
    one_context = [(B, 64, LAWS["fitted"].updates(B, 64)) for B in (8, 16, 32)]
    with pytest.raises(IhprobeError, match=r"same context.*fit_law\(points, c=0.62\)"):
        fit_law(one_context)  # each exponent's example is its own published value
    fit = fit_law(points, b=0.37)
    assert fit.c == pytest.approx(0.62) and fit.b == 0.37 and fit.fixed == ("b",)
    assert fit.T == pytest.approx(750_000)


def test_fit_accepts_emergence_points_and_skips_runs_without_transition():
    law = LAWS["fitted"]
    points = [
        EmergencePoint(
            "prefix_matching", "max", True, updates=law.updates(B, C), batch_size=B, context=C
        )
        for B, C in ((4, 32), (8, 64), (16, 32), (4, 128))
    ]
    none = EmergencePoint("prefix_matching", "max", False, batch_size=2, context=16)
    fit = fit_law([*points, none])
    assert len(fit.points) == 4
    assert (fit.b, fit.c) == (pytest.approx(0.37), pytest.approx(0.62))


def test_runs_cut_off_before_their_point_are_kept_as_lower_bounds_not_dropped():
    """Over 20 grids, each with its slowest runs (small B and C) stopped at a budget: the
    censored fit stays within 0.05 of both exponents; dropping the stopped runs flattens c."""
    truth, budget, kept, dropped = Law(T=2e5, b=0.25, c=0.8), 6000.0, [], []
    for seed in range(20):
        points = _grid_points(truth, noise=0.3, seed=seed)
        cut = [(B, C, min(U, budget), U > budget) for B, C, U in points]  # training stopped
        kept.append(fit_law(cut))
        dropped.append(fit_law([(B, C, U) for B, C, U, censored in cut if not censored]))
    assert 0.15 < np.mean([f.censored for f in kept]) / 30 < 0.5
    bias = {
        (way, k): np.mean([getattr(f, k) for f in fits]) - getattr(truth, k)
        for way, fits in (("kept", kept), ("dropped", dropped))
        for k in "bc"
    }
    assert abs(bias["kept", "b"]) < 0.05 and abs(bias["kept", "c"]) < 0.05
    assert bias["dropped", "c"] < -0.1
    assert kept[0].to_dict()["censored"] == kept[0].censored and kept[0].to_frame().censored.any()
    only_bounded = [(8, 128, 12_000, True), (32, 128, 2900), (32, 128, 1800)]  # b: no upper end
    with pytest.raises(IhprobeError, match="every point that places its emergence point has"):
        fit_law(only_bounded, c=0.62)
    with pytest.raises(IhprobeError, match="none of the 3 run"):
        fit_law([(4, 64, 1000, True), (8, 32, 1000, True), (8, 64, 900, True)])


def test_emergence_points_without_a_placed_point_are_censored_at_their_bound():
    law, steps = LAWS["fitted"], pd.DataFrame({"step": [0, 10, 100, 40_000]})
    placed = [
        EmergencePoint(
            "prefix_matching",
            "max",
            True,
            updates=law.updates(B, C),
            batch_size=B,
            context=C,
            updates_low=1,
            updates_high=2,
            curve=steps,
        )
        for B, C in ((4, 32), (8, 64), (16, 32), (4, 128))
    ]
    none = EmergencePoint("prefix_matching", "max", False, batch_size=2, context=16, curve=steps)
    edge = EmergencePoint(
        "prefix_matching",
        "max",
        True,
        updates=30_000.0,
        updates_low=30_000,
        updates_high=40_000,
        batch_size=64,
        context=64,
        curve=steps,
    )
    fit = fit_law([*placed, none, edge])
    rows = fit.points.iloc[-2:]
    assert rows.censored.all() and rows.updates.tolist() == [40_000.0, 30_000.0]
    assert fit.censored == 2 and not fit.points.censored.iloc[:4].any()


def test_fit_rejects_points_without_values():
    with pytest.raises(IhprobeError, match="positive"):
        fit_law([(4, 64, 1000), (8, 64, None), (8, 32, 500)])


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("16", 64), {}),
        ((4.5, 64), {}),
        ((4, 64), {"b": float("inf")}),
        ((4, 64), {"T": float("nan")}),
        ((4, 64), {"T": -1.0}),
    ],
)
def test_predict_refuses_what_is_not_a_shape_or_a_finite_law(args, kwargs):
    with pytest.raises(IhprobeError):
        predict_emergence(*args, **kwargs)
