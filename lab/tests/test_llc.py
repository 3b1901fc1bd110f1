"""The LLC over checkpoints: finite at every checkpoint of a run trained here, the optional
extra's message, and the stage sentence for both outcomes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.llc import SGLDSettings, llc_stages, llc_trajectory
from lab.studies.llc.claims import stage_sentence

FEW = SGLDSettings(chains=2, draws=8, batch_size=8, rows=32, init_batches=2)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from ihprobe.training.trainer import TrainConfig, train

    out = tmp_path_factory.mktemp("llc") / "run"
    config = TrainConfig(
        out=str(out),
        producer="iid",
        layers=1,
        heads=2,
        d_model=16,
        context=16,
        batch_size=8,
        steps=40,
        checkpoints=(0, 1280, 5120),
        progress=False,
    )
    return train(config)


@pytest.mark.slow
def test_llc_is_finite_at_every_checkpoint_and_cached(small_run, tmp_path):
    pytest.importorskip("devinterp")
    traj = llc_trajectory(small_run, FEW, cache=tmp_path)
    assert list(traj.frame.step) == [0, 10, 40]
    assert np.isfinite(traj.frame.llc_mean).all()
    assert np.isfinite(traj.traces.loss).all()
    assert len(traj.traces) == 3 * FEW.chains * FEW.draws
    assert set(traj.checks.columns) >= {"finite", "positive", "levelled", "chains_agree"}
    # every chain starts at w*: its first draw's loss is close to the init loss
    first = traj.traces[traj.traces.draw == 0].groupby("step").loss.mean()
    assert np.allclose(first.to_numpy(), traj.frame.init_loss.to_numpy(), atol=0.5)
    again = llc_trajectory(small_run, FEW, cache=tmp_path)  # from the cache: same numbers
    assert again.frame.llc_mean.tolist() == traj.frame.llc_mean.tolist()


def test_without_devinterp_one_line_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "devinterp", None)
    monkeypatch.setitem(sys.modules, "devinterp.slt.llc", None)
    with pytest.raises(IhprobeError, match=r"ihprobe\[llc\]") as err:
        llc_trajectory(tmp_path)
    assert "\n" not in str(err.value)


def test_a_directory_that_is_not_a_run_is_refused(tmp_path):
    pytest.importorskip("devinterp")
    with pytest.raises(IhprobeError, match="not an ihprobe run"):
        llc_trajectory(tmp_path)


def point(updates, low=None, high=None, metric="llc"):
    return EmergencePoint(metric, "max", True, updates=updates, updates_low=low, updates_high=high)


def test_stage_sentence_inside_and_outside_the_bracket():
    ps = point(1000.0, 900.0, 1200.0, metric="prefix_matching")
    inside = stage_sentence(point(950.0), ps)
    assert "lies within" in inside and "50 updates earlier" in inside
    outside = stage_sentence(point(1500.0), ps)
    assert "lies outside" in outside and "500 updates later" in outside
    none = stage_sentence(EmergencePoint("llc", "max", False, reason="llc never rises"), ps)
    assert "no change point" in none and "llc never rises" in none


def test_llc_stages_find_a_planted_step():
    from ihprobe.dynamics.llc import LLCTrajectory

    steps = np.arange(0, 2100, 100)
    values = np.where(steps < 1000, 20.0, 80.0) + np.random.default_rng(0).normal(0, 1, len(steps))
    import pandas as pd

    frame = pd.DataFrame({"step": steps, "tokens": steps * 2048, "llc_mean": values})
    traj = LLCTrajectory(frame, pd.DataFrame(), FEW, "planted")
    stage = llc_stages(traj)
    assert stage.transition and 900 <= stage.updates <= 1000


def test_the_llc_figure_draws_llc_ps_and_every_chain():
    import pandas as pd

    from ihprobe.dynamics.llc import LLCTrajectory
    from ihprobe.figures.forecast import llc_figure

    frame = pd.DataFrame(
        {
            "step": [0, 10],
            "tokens": [0, 640],
            "llc_mean": [3.0, 9.0],
            "llc_std": [0.5, 1.0],
            "init_loss": [5.0, 4.0],
        }
    )
    traces = pd.DataFrame(
        {
            "step": [0, 0, 10, 10] * 2,
            "chain": [0, 0, 0, 0, 1, 1, 1, 1],
            "draw": [0, 1] * 4,
            "loss": [5.0, 5.1, 4.0, 4.2] * 2,
        }
    )
    table = pd.DataFrame(
        {"step": [0, 10], "tokens": [0, 640], "metric": "prefix_matching", "value": [0.1, 0.6]}
    )
    fig = llc_figure(LLCTrajectory(frame, traces, FEW, "r"), table)
    names = [t.name for t in fig.data]
    assert "LLC" in names and "max PS" in names
    assert sum(name.startswith("step ") for name in names) == 4  # 2 checkpoints x 2 chains
    ps_axis = fig.data[names.index("max PS")].yaxis
    assert fig.layout[ps_axis.replace("y", "yaxis")].tickmode == "auto"  # its own 0..1 ticks
