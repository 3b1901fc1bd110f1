"""Long work warns before it starts (issue 59, item 10): ``llc_trajectory``,
``ablation_trajectory`` and ``trajectory`` estimate the whole from the first checkpoint's size
and their settings and warn before the first checkpoint's work when it is minutes (the estimate
is patched here: no timing is asserted); a quick estimate stays quiet, and an announced loop
does not warn again."""

from __future__ import annotations

import json
import logging

import pytest

import ihprobe
from ihprobe.causal import fv
from ihprobe.core import stages
from ihprobe.dynamics import ablation_series, llc, trajectories
from ihprobe.series import estimates
from tests.helpers import fake_run, save_checkpoint, tiny_hf_model


class Started(Exception):
    """Raised by the first checkpoint's work: the test stops there."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = fake_run(tmp_path_factory.mktemp("warn") / "run", steps=[0, 10, 20])
    config = {"producer": "iid", "batch_size": 2, "context": 64, "seed": 0, "steps": 20}
    (root / "run.json").write_text(json.dumps({"config": config}))
    return root


def _said_before_work(monkeypatch, caplog, seconds: float, call, stop) -> list[str]:
    """The warnings logged before the first checkpoint's work, with each estimate ``seconds``."""
    monkeypatch.setattr(estimates, "rough_seconds", lambda flops, device="cpu": seconds)
    seen = []

    def first_work(*args, **kwargs):
        seen.extend(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        raise Started

    stop(first_work)
    with caplog.at_level(logging.WARNING, logger="ihprobe"), pytest.raises(Started):
        call()
    return seen


def test_llc_trajectory_warns_before_its_first_checkpoint(run, monkeypatch, caplog):
    def stop(work):
        monkeypatch.setattr(llc, "_sampler", lambda: work)

    call = lambda: ihprobe.llc_trajectory(run, cache=False)  # noqa: E731
    (said,) = _said_before_work(monkeypatch, caplog, 100.0, call, stop)
    assert said.startswith("LLC: about 5 min of work for 3 checkpoints by a rough estimate")
    caplog.clear()
    assert _said_before_work(monkeypatch, caplog, 1.0, call, stop) == []  # 3 s: quiet


def test_ablation_trajectory_warns_before_its_first_checkpoint(run, monkeypatch, caplog):
    def stop(work):
        monkeypatch.setattr(ablation_series, "_rows", work)

    call = lambda: ihprobe.ablation_trajectory(run, cache=False, progress=False)  # noqa: E731
    (said,) = _said_before_work(monkeypatch, caplog, 40.0, call, stop)
    assert said.startswith("ablation_trajectory: about 2 min of work for 3 checkpoints")


def test_trajectory_warns_before_its_first_checkpoint(run, monkeypatch, caplog):
    def stop(work):
        monkeypatch.setattr(trajectories, "scan_rows", work)

    call = lambda: ihprobe.trajectory(run, ["prefix_matching"], cache=False)  # noqa: E731
    (said,) = _said_before_work(monkeypatch, caplog, 30.0, call, stop)
    assert said.startswith("trajectory: about 90 s of work for 3 checkpoints")  # 30 s each


def test_fv_scores_warns_before_its_first_task(run, monkeypatch, caplog, tokenizer, tmp_path):
    model = ihprobe.load(save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "m", tokenizer))

    def stop(work):
        monkeypatch.setattr(fv, "_task", work)

    monkeypatch.setattr(fv, "rough_seconds", lambda flops, device="cpu": 600.0)
    call = lambda: ihprobe.fv_scores(model)  # noqa: E731
    (said,) = _said_before_work(monkeypatch, caplog, 0.0, call, stop)
    assert said == "fv_scores: about 10 min of work by a rough estimate"
    caplog.clear()
    monkeypatch.setattr(fv, "rough_seconds", lambda flops, device="cpu": 5.0)
    assert _said_before_work(monkeypatch, caplog, 0.0, call, stop) == []
    monkeypatch.undo()  # the unpatched estimate grows with the work: a pass per head in
    # the reference loop, a last-token row per head in the fast one
    fast = fv._rough_seconds(model, 1, 4, 10, "fast")
    assert 0 < fast < fv._rough_seconds(model, 1, 4, 10, "reference")
    assert fv._rough_seconds(model, 2, 4, 10, "fast") == pytest.approx(2 * fast)


def test_the_estimate_reads_the_first_checkpoints_files(run):
    (first, *_) = ihprobe.checkpoints(run)
    shape = estimates.shape_of_checkpoint(first)
    assert (shape["layers"], shape["heads"], shape["context"]) == (2, 4, 64)  # fake_run's model
    hf = tiny_hf_model("gpt-neox", vocab_size=64, context=64, seed=0)  # what fake_run saved
    assert shape["parameters"] == sum(p.numel() for p in hf.parameters())
    # more work, more time: the draws and the heads alone are counted
    few = {"random": 2, "batch": 10, "text_rows": 0}
    many = {**few, "random": 20}
    assert ablation_series._flops(shape, many, True) > ablation_series._flops(shape, few, True)
    assert ablation_series._flops(shape, few, True) > ablation_series._flops(shape, few, False)


def test_an_announced_loop_does_not_warn_again(caplog):
    log = logging.getLogger("ihprobe.test")
    with caplog.at_level(logging.WARNING, logger="ihprobe"):
        with stages.announced_work(log, "LLC", 5, 300.0) as warned:
            assert warned and stages.Counter(log, "LLC", 5).announced
        assert not stages.Counter(log, "LLC", 5).announced  # outside the block: it warns
        with stages.announced_work(log, "scan", 5, 1.0) as warned:
            assert not warned and not stages.Counter(log, "scan", 5).announced
    assert [r.getMessage()[:28] for r in caplog.records] == ["LLC: about 25 min of work fo"]


def test_a_resumed_training_run_announces_only_the_updates_it_has_left(tmp_path, monkeypatch):
    """``ihprobe train --resume`` at update 15,000 of 20,000 estimates the 5,000 left (the
    saved state's update read from its file's name), and says which; a new run, a run not
    resumed, and a state file whose name holds no update count estimate the whole budget."""
    from ihprobe.training import config as training

    said = []
    monkeypatch.setattr(training, "check_work", lambda what, found, **_: said.append((what, found)))
    out = tmp_path / "run"
    base = {"out": str(out), "producer": "iid", "d_model": 128, "context": 128, "steps": 20_000}
    training.check_training_size(training.TrainConfig(**base, resume_or_start=True))
    (out / "state").mkdir(parents=True)
    (out / "state" / "step-015000.pt").touch()
    training.check_training_size(training.TrainConfig(**base, resume=True))
    training.check_training_size(training.TrainConfig(**base))  # not resumed: the whole
    (whole_what, whole), (what, left), (_, again) = said
    assert left.flops == pytest.approx(whole.flops / 4) and again.flops == whole.flops
    assert what == whole_what + ", updates 15,000 to 20,000" and "updates" not in whole_what
    (out / "state" / "step-015000.pt").rename(out / "state" / "step-last.pt")
    training.check_training_size(training.TrainConfig(**base, resume=True))
    assert said[-1][1].flops == whole.flops  # no count in the name: the cautious whole
