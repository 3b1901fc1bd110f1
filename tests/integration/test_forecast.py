"""The live emergence forecast: the law before data, a known onset, a recorded run, the refit."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.forecast import forecast_emergence, forecast_records
from ihprobe.dynamics.law import predict_emergence
from ihprobe.dynamics.prior import DEFAULT_SPREAD, Prior, law_prior

# A recorded probes.jsonl: the demo configuration at B=16 (seed 0), max PS per checkpoint.
RECORDED = [
    (0, 0.021), (150, 0.024), (300, 0.022), (450, 0.025), (600, 0.026), (750, 0.027),
    (900, 0.061), (1050, 0.277), (1200, 0.461), (1350, 0.485), (1500, 0.575), (1650, 0.619),
    (1800, 0.642), (1950, 0.662), (2100, 0.668), (2250, 0.676), (2400, 0.671), (2550, 0.669),
]  # fmt: skip  # a data table: recorded (step, max PS), six a line


def records(pairs):
    return [{"step": s, "max_prefix_matching": v} for s, v in pairs]


def ramp_run(onset: float, steps, noise: float = 0.01, seed: int = 0):
    """Max PS flat at 0.05 until ``onset`` updates, then up to 0.75 over 0.15 decades."""
    rng = np.random.default_rng(seed)
    pairs = []
    for s in steps:
        frac = 0.0 if s <= onset else min(1.0, math.log10(s / onset) / 0.15)
        pairs.append((s, 0.05 + 0.7 * frac + rng.normal(0, noise)))
    return records(pairs)


def test_before_any_data_the_forecast_is_the_laws_value():
    law = predict_emergence(32, 64)
    prior = law_prior(32, 64)
    for data in ([], records([(0, 0.04)])):  # nothing, then only the untrained model's probe
        f = forecast_emergence(data, prior)
        assert f.source == "law"
        assert f.updates == law.updates
        assert f.tokens == law.tokens
        assert f.updates_low < law.updates < f.updates_high
        # the interval is the prior's central 80%: +-1.2816 sd in log10 updates
        assert math.log10(f.updates_high / law.updates) == pytest.approx(
            1.2816 * DEFAULT_SPREAD, rel=1e-3
        )


def test_flat_data_pushes_the_forecast_past_the_data():
    prior = Prior(updates=600, spread=0.3, law="test", batch_size=32, context=64)
    flat = records([(s, 0.05 + 0.003 * (-1) ** (s // 100)) for s in range(0, 1001, 100)])
    f = forecast_emergence(flat, prior)
    assert f.source == "posterior"
    assert f.updates > 1000  # the prior's median (600) is ruled out: nothing rose by 1000
    assert f.updates_low > 600


@pytest.mark.parametrize("onset", [700, 1000, 1500])
def test_a_known_onset_is_inside_the_interval_once_the_rise_starts(onset):
    steps = list(range(0, 3001, 100))
    run = ramp_run(onset, steps)
    prior = Prior(updates=onset * 2.5, spread=0.4, law="test", batch_size=32, context=64)
    first_rise = min(s for s in steps if s > onset)
    after = forecast_emergence(run[: steps.index(first_rise) + 2], prior)  # 2 points into the rise
    assert after.covers(onset), after
    final = forecast_emergence(run, prior)
    assert final.detected and final.covers(onset)
    assert final.updates_high - final.updates_low <= 100  # collapses to one checkpoint gap


def test_a_recorded_run_is_covered_at_30_percent_and_collapses_after_detection():
    data = records(RECORDED)
    # the measured point lies between the last flat checkpoint (750) and the first >= 0.3 (1200)
    prior = Prior(updates=1800, spread=0.3, law="test", batch_size=16, context=64)
    by_step = {f.at_step: f for f in forecast_records(data, prior)}
    early = by_step[750]  # 30% of the 2,550 updates recorded
    assert early.source == "posterior" and early.updates_low < 1200 and early.updates_high > 750
    final = by_step[2550]
    assert final.detected
    assert 750 <= final.updates_low < final.updates <= final.updates_high <= 1200


def test_nothing_detected_below_the_threshold():
    data = records([(s, 0.05 if s < 1000 else 0.25) for s in range(0, 2001, 100)])
    f = forecast_emergence(data, Prior(800, 0.3, "test", 32, 64))
    assert not f.detected  # PS never reached 0.3


def point(batch_size: int, updates: float, context: int = 64) -> EmergencePoint:
    return EmergencePoint(
        "prefix_matching", "max", True, updates=updates, batch_size=batch_size, context=context
    )


def test_law_from_two_batch_sizes_interpolates_geometrically():
    prior = law_prior(32, 64, law_from=[point(16, 900), point(64, 400)])
    assert prior.updates == pytest.approx(math.sqrt(900 * 400))  # log-midpoint of B
    assert prior.spread == DEFAULT_SPREAD  # an exact fit measures no scatter
    assert prior.runs == 2


def test_law_from_one_run_keeps_the_laws_exponents():
    prior = law_prior(32, 64, law_from=[point(16, 900)])
    assert prior.updates == pytest.approx(900 / 2**0.37)  # [A]'s b = 0.37


def test_law_from_residuals_set_the_spread():
    pts = [point(16, 1000), point(32, 500), point(64, 400)]
    prior = law_prior(32, 64, law_from=pts)
    logs = np.log10([1000, 500, 400])
    x = np.log10([16, 32, 64])
    slope, intercept = np.polyfit(x, logs, 1)
    residual = logs - (intercept + slope * x)
    assert prior.spread == pytest.approx(max(0.1, math.sqrt((residual**2).sum() / 1)))
    assert prior.updates == pytest.approx(10 ** (intercept + slope * math.log10(32)))


def test_law_from_keeps_a_run_that_stopped_before_its_point_as_a_bound():
    stopped = EmergencePoint(
        "prefix_matching",
        "max",
        False,
        batch_size=32,
        context=64,
        curve=pd.DataFrame({"step": [0, 100, 2000]}),
    )
    prior = law_prior(32, 64, law_from=[point(16, 900), point(64, 400), stopped])
    assert prior.runs == 3 and prior.law.endswith("1 censored")
    assert prior.updates > math.sqrt(900 * 400)  # at least 2,000 at B = 32 pulls it later
    one_b = law_prior(32, 64, law_from=[point(16, 900), stopped])  # b stays [A]'s
    assert one_b.runs == 2 and one_b.updates >= 900 / 2**0.37


def test_law_from_runs_without_transition_is_an_error():
    flat = EmergencePoint("prefix_matching", "max", False, reason="never rises")
    with pytest.raises(IhprobeError, match="law-from"):
        law_prior(32, 64, law_from=[flat])


def test_bad_level_is_an_error():
    with pytest.raises(IhprobeError, match="level"):
        forecast_emergence([], law_prior(32, 64), level=80)


def test_the_figure_draws_forecast_interval_and_measured_point():
    from ihprobe.figures.forecast import forecast_figure

    data = records(RECORDED[:8])
    forecasts = forecast_records(data, Prior(1800, 0.3, "test", 16, 64))
    measured = EmergencePoint(
        "prefix_matching", "max", True, updates=880.0, updates_low=750.0, updates_high=900.0
    )
    fig = forecast_figure(forecasts, measured)
    median = next(t for t in fig.data if t.name == "forecast (median)")
    assert list(median.x) == [s for s, _ in RECORDED[:8]]
    assert list(median.y) == [f.updates for f in forecasts]
    assert any(shape.y0 == 880.0 for shape in fig.layout.shapes)  # the measured line
    band = [(s.y0, s.y1, s.xref) for s in fig.layout.shapes if s.type == "rect"]
    assert band == [(750.0, 900.0, "x domain")]  # the bracketing checkpoints, across the plot


def test_live_hook_writes_forecast_jsonl_and_records_detection_in_run_json(tmp_path):
    import json

    from ihprobe.dynamics.forecast import FORECAST, LiveForecast
    from ihprobe.io.runs import PROBES, RUN_META, RunDir

    run = RunDir(tmp_path)
    run.write_json(RUN_META, {"config": {"batch_size": 16, "context": 64}})
    hook = LiveForecast(tmp_path, Prior(1800, 0.3, "test", 16, 64))
    for record in records(RECORDED):
        run.append(PROBES, record)
        hook(record)
    lines = run.records(FORECAST)
    assert [line["step"] for line in lines] == [s for s, _ in RECORDED]
    assert lines[0]["updates"] == 1800 and lines[0]["source"] == "law"
    assert lines[-1]["detected"] and hook.latest.postfix().startswith("emerged")
    first = next(line for line in lines if line["detected"])
    meta = json.loads((tmp_path / RUN_META).read_text())
    assert meta["emergence"]["detected_at_step"] == first["step"]
    assert 750 <= meta["emergence"]["updates"] <= 1200


@pytest.mark.slow
def test_train_with_forecast_starts_at_the_laws_value(tmp_path):
    from ihprobe.dynamics.forecast import FORECAST
    from ihprobe.io.runs import PROBES, RunDir
    from ihprobe.training.trainer import TrainConfig, train

    config = TrainConfig(
        out=str(tmp_path / "run"),
        producer="iid",
        layers=1,
        heads=2,
        d_model=16,
        context=16,
        batch_size=8,
        steps=20,
        checkpoints="linear",
        n_checkpoints=2,
        live_probes=True,
        forecast=True,
        progress=False,
    )
    run = RunDir(train(config))
    lines, probes = run.records(FORECAST), run.records(PROBES)
    assert [line["step"] for line in lines] == [p["step"] for p in probes] == [0, 10, 20]
    assert lines[0]["updates"] == predict_emergence(8, 16).updates


def test_forecast_without_live_probes_is_a_config_error():
    from ihprobe.training.config import TrainConfig, check_config

    with pytest.raises(IhprobeError, match="live_probes"):
        check_config(TrainConfig(forecast=True))
    with pytest.raises(IhprobeError, match="forecast"):
        check_config(TrainConfig(live_probes=True, law_from=("runs/a",)))


def test_read_forecasts_gives_back_what_the_hook_wrote(tmp_path):
    from ihprobe.dynamics.forecast import LiveForecast, read_forecasts
    from ihprobe.io.runs import PROBES, RunDir

    hook = LiveForecast(tmp_path, Prior(1800, 0.3, "test", 16, 64))
    for record in records(RECORDED[:6]):
        RunDir(tmp_path).append(PROBES, record)
        hook(record)
    back = read_forecasts(tmp_path)
    assert back[-1] == hook.latest and len(back) == 6
    assert read_forecasts(tmp_path / "elsewhere") == []


def test_the_figure_axis_is_log_updates_clipped_to_the_run_when_a_bound_is_unbounded():
    """An interval reaching inf or 1e308 (the law's, early in a run) used to stretch the axis
    to 1..1e308 and flatten every line; the axis now stays within 100x the run's length."""
    from ihprobe.figures.forecast import forecast_figure

    forecasts = forecast_records(records(RECORDED[:8]), Prior(1800, 0.3, "test", 16, 64))
    forecasts[0] = replace(forecasts[0], updates_high=math.inf)
    forecasts[1] = replace(forecasts[1], updates_high=1e308, updates_low=1e-300)
    measured = EmergencePoint(
        "prefix_matching", "max", True, updates=880.0, updates_low=750.0, updates_high=900.0
    )
    fig = forecast_figure(forecasts, measured)
    axis = fig.layout.yaxis
    low, high = (10**v for v in axis.range)
    run_end = max(RECORDED[7][0], 900.0)
    assert axis.type == "log" and run_end / 100 / 1.31 <= low < 750  # 100x either way, margin
    assert 900 < high <= run_end * 100 * 1.31
    assert all(low <= f.updates <= high for f in forecasts)  # every median is on the chart
    band = [y for t in fig.data[:2] for y in t.y]
    assert all(math.isfinite(y) and low <= y <= high for y in band)  # filled to the edge
