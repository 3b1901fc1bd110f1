"""Small refusals of issue 59 (item 12): ``--suite-option deduped=maybe`` is refused, not read as
false; a sweep whose runs would save too few distinct checkpoints is refused at the pre-check
(``--steps 8 --n-checkpoints 6`` rounds to 5 past step 0), not after training; a refused sweep
prints its one line with no work warning before it; and a checkpoint schedule of 1e9 points
costs no loop of 1e9."""

from __future__ import annotations

import logging
import time

import pytest

from ihprobe.training import schedule
from ihprobe.training.schedule import checkpoint_steps
from tests.helpers import cli_refused


def test_a_suite_option_that_is_neither_true_nor_false_is_refused(tmp_path, capsys, monkeypatch):
    for value in ("maybe", "2", "yes"):
        line = cli_refused(
            ["scan", "--suite", "pythia", "--suite-option", f"deduped={value}"],
            tmp_path,
            capsys,
            monkeypatch,
            "deduped must be true or false",
        )
        assert value in line


def test_a_sweep_with_too_few_distinct_checkpoints_is_refused_before_training(
    tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    argv = ["sweep", "--out", str(out), "--grid", "seed=0", "--"]
    line = cli_refused(
        [*argv, "--steps", "8", "--n-checkpoints", "6"], tmp_path, capsys, monkeypatch, "too few"
    )
    assert "5 checkpoint(s) past step 0 (6 asked" in line
    assert not (out / "runs").exists()  # nothing trained


def test_a_refused_sweep_prints_no_warning_first(tmp_path, capsys, monkeypatch, caplog):
    """8,000 updates announce minutes of work; the grid is refused (2 checkpoints), so the
    announcement is not shown: one verdict, the refusal."""
    out = tmp_path / "out"
    argv = ["sweep", "--out", str(out), "--grid", "seed=0", "--", "--steps", "8000"]
    with caplog.at_level(logging.WARNING):
        cli_refused([*argv, "--n-checkpoints", "2"], tmp_path, capsys, monkeypatch, "too few")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("ihprobe")] == []


def _reference(spec, total, n, end):
    """The schedule point by point, as it was computed before (a loop over every point)."""
    steps = {schedule._point(spec, i, total=total, n=n) for i in range(1, n + 1)}
    i = n + 1
    while total > 1 and (step := schedule._point(spec, i, total=total, n=n)) <= end:
        steps.add(step)
        i += 1
    return sorted(steps | {0, total, end})


@pytest.mark.parametrize("spec", ["log", "linear"])
def test_the_schedule_equals_the_point_by_point_loop(spec):
    for total in (1, 2, 3, 10, 57, 300):
        for n in [*range(1, 30, 4), 97, 700]:
            for end in (total, total + 1, 3 * total + 5):
                found = checkpoint_steps(
                    spec, total=total, tokens_per_update=1, n=n, extended_to=end
                )
                assert found == _reference(spec, total, n, end), (spec, total, n, end)


def test_a_billion_checkpoints_cost_no_loop_of_a_billion():
    start = time.process_time()
    for spec in ("log", "linear"):
        found = checkpoint_steps(spec, total=8000, tokens_per_update=1, n=10**9)
        assert found == list(range(8001))  # every update, saved once
    extended = checkpoint_steps(
        "linear", total=8000, tokens_per_update=1, n=10**12, extended_to=9000
    )
    assert extended == list(range(9001))
    assert time.process_time() - start < 2.0
