"""The law study's i.i.d. control (lab/studies/law/control.py) chooses its verdict by the shared
rules: judged by each run's highest prefix matching, the check at each peak read as a fixed-offset
head only when every run shows one, the loss check, and (slow) a tiny i.i.d. run whose peak
checkpoint is probed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.studies.law import control
from lab.tests.law_helpers import law_frame


@pytest.mark.parametrize(
    "peaks, verdict",
    [
        ((0.02, 0.03, 0.025, 0.02, 0.03), "agrees"),
        ((0.6, 0.5, 0.7, 0.55, 0.65), "disagrees"),
        ((0.02, 0.3, 0.03, 0.02, 0.25), "inconclusive at this scale"),
        ((0.02, 0.03, 0.025), "pending: 3 of 5 seeds"),
    ],
)
def test_the_iid_control_is_judged_by_each_runs_highest_prefix_matching(peaks, verdict):
    frame = control_frame(peaks)
    line = control.control_lines(frame)[0]
    assert f"**{verdict}**" in line and "placed an emergence point in 5 of 5 seeds" in line
    assert "a transition in 0 of" in line and f"{peaks[0]:.3f}" in line
    assert len(control.control_lines(frame)) == 1  # no peak checked: no check line


@pytest.mark.parametrize(
    "varied, ar, reads",
    [
        (0.05, 0.004, "a signature without induction"),
        (0.25, 0.004, "not every peak is explained by fixed offsets"),
        (0.05, 0.5, "not every peak is explained by fixed offsets"),
    ],
)
def test_the_check_at_each_peak_reads_a_fixed_offset_head_only_when_every_run_shows_one(
    varied, ar, reads
):
    check = {"peak_ps_min": varied, "peak_ar": ar, "peak_ps_by_length": "0.1", "peak_fiv": varied}
    frame = control_frame((0.3, 0.2, 0.25, 0.15, 0.27), check)
    lines = control.control_lines(frame)
    assert "**disagrees**" in lines[0] and reads in lines[1]
    quiet = control_frame((0.02, 0.03, 0.025, 0.02, 0.03), check)
    assert "nothing to explain" in control.control_lines(quiet)[1]
    base = (frame.cell == control.CELL) & (frame.seed == 3)
    frame.loc[base, ["base_ps_min", "base_ar", "base_fiv"]] = [0.46, 0.13, 0.5]
    positive = control.control_lines(frame)[2]
    assert "positive control; seeds 3, whose" in positive and "0.460" in positive


def test_the_loss_check_reads_the_last_losses_and_the_marginals_entropy(tmp_path):
    logged = [{"step": i, "loss": float(i)} for i in range(30)] + [{"step": 30, "probe": 1}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, logged)))
    checked = control.loss_check(tmp_path, {"vocab_size": 64, "marginal": "uniform"})
    assert checked["final_loss"] == pytest.approx(np.mean(range(10, 30)))  # the last 20
    assert checked["marginal_entropy"] == pytest.approx(np.log(64), rel=1e-6)  # uniform: ln V


def control_frame(peaks, check: dict | None = None) -> pd.DataFrame:
    """The law frame with the control's first ``len(peaks)`` seeds done at those peaks, each
    with the peak check's columns ``check``."""
    frame = law_frame(0.37, 0.62)
    frame["peak_ps_min"], frame["peak_ar"], frame["peak_ps_by_length"] = np.nan, np.nan, None
    frame["base_ps_min"], frame["base_ar"], frame["base_fiv"] = np.nan, np.nan, np.nan
    rows = frame.index[(frame.cell == control.CELL) & (frame.seed < len(peaks))]
    frame.loc[rows, ["status", "transition", "steps"]] = ["done", False, 8200]
    frame.loc[rows, "max_ps"] = peaks
    for column, value in (check or {}).items():
        frame.loc[frame.cell == control.CELL, column] = value
    return frame


@pytest.mark.slow  # trains a tiny i.i.d. run: about 10 s
def test_the_peak_check_probes_the_checkpoint_where_the_curve_peaks(tmp_path):
    import ihprobe
    from ihprobe.training.trainer import TrainConfig, train

    config = TrainConfig(
        out=str(tmp_path / "iid"),
        producer="iid",
        producer_options={"vocab_size": 64, "marginal": "zipf"},
        layers=2,
        heads=2,
        d_model=32,
        context=64,
        batch_size=8,
        steps=40,
        n_checkpoints=4,
        progress=False,
    )
    run = train(config)
    steps = [c.step for c in ihprobe.checkpoints(run)]
    peaked = [0.5 if i == 1 else 0.1 for i in range(len(steps))]
    curve = pd.DataFrame({"step": steps, "value": peaked})
    checked = control.peak_check(run, curve)
    assert checked["peak_step"] == steps[1]
    where = ihprobe.checkpoints(run)[1].source
    by_length = [
        ihprobe.scan(where, ["prefix_matching"], n=control.N + s, batch=control.ROWS)
        .head["prefix_matching"]
        .max()
        .item()
        for s in control.SHIFTS
    ]
    assert checked["peak_ps_min"] == pytest.approx(min(by_length))
    varied = ihprobe.scan(where, ["forward_induction_varied"], batch=control.ROWS)
    assert checked["peak_fiv"] == pytest.approx(varied.head["forward_induction_varied"].max())
    assert checked["peak_ps_by_length"] == ";".join(f"{v:.3f}" for v in by_length)
    assert 0.0 <= checked["peak_ar"] <= 1.0
    base = control.base_check(Path(run))  # the last checkpoint, the same probes
    last = ihprobe.checkpoints(run)[-1].source
    assert (
        base["base_ar"]
        == ihprobe.scan(last, ["ar_accuracy"], n=control.N, batch=control.ROWS).model["ar_accuracy"]
    )
    assert control.base_check(tmp_path / "gone") == {"base_checked": True}
