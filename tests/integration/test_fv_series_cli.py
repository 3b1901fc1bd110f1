"""``fv`` over a series from the command line (issue 61): ``ihprobe emergence --metric fv
--task FILE`` finds the step where the planted FV head grows, and its ``--html`` page and
``ihprobe scan``'s heatmaps show FV beside prefix matching, or, where a checkpoint does no task
above chance, the note that says so. Known answers: ``tests/planted_fv.py``'s FV head writes
``fv_scale``; without it the decoy answer wins."""

from __future__ import annotations

import json

import pytest

import ihprobe
from ihprobe.cli import main
from tests.helpers import cli_refused
from tests.planted_fv import PAIRS, save_planted
from tests.unit.test_fv_scan import TASK, planted_run


def task_file(folder):
    path = folder / "planted.tsv"
    path.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS))
    return path


@pytest.mark.slow
def test_emergence_metric_fv_finds_the_planted_rise(tmp_path, capsys, monkeypatch):
    run = planted_run(tmp_path / "run")  # FV head off until step 4, on from step 8
    task, page = task_file(tmp_path), tmp_path / "emergence.html"
    argv = ["emergence", str(run), "--metric", "fv", "--task", str(task), "--json"]
    assert main([*argv, "--html", str(page)]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert found["metric"] == "fv" and found["transition"]
    assert 4_000 <= found["tokens_high"] <= 8_000  # the checkpoints at steps 4 and 8 bracket it
    direct = ihprobe.run_emergence(run, "fv", tasks=[TASK], progress=False)
    assert found["tokens"] == pytest.approx(direct.tokens)  # the API's point
    shown = page.read_text(encoding="utf-8")
    assert "max FV score" in shown and "max prefix matching" in shown  # side by side
    assert "fv skipped" not in shown  # every checkpoint does the task

    argv = ["emergence", str(run), "--task", str(task)]  # prefix matching has no tasks
    cli_refused(argv, tmp_path, capsys, monkeypatch, "pass --metric fv")


def skipping_run(root):
    """Two checkpoints without the FV head (no task above chance), then seven with it growing
    (enough for the change-point fit)."""
    for step, scale in enumerate((0.0, 0.0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)):
        folder = root / "checkpoints" / f"step-{step:06d}"
        save_planted(folder, fv_scale=scale)
        meta = {"step": step, "tokens": step * 1000, "run": "planted"}
        (folder / "ihprobe.json").write_text(json.dumps(meta))
    return root


@pytest.mark.slow
def test_the_pages_say_where_fv_was_skipped(tmp_path, capsys):
    run, task = skipping_run(tmp_path / "run"), task_file(tmp_path)
    page = tmp_path / "emergence.html"
    argv = ["emergence", str(run), "--metric", "fv", "--task", str(task), "--html", str(page)]
    assert main(argv) == 0
    shown = page.read_text(encoding="utf-8")
    said = "fv skipped at 2 of 9 checkpoints: no task is done above chance at step 0, step 1"
    assert said + " (clean accuracy at most 0)" in shown and "max FV score" in shown

    out = tmp_path / "scan"
    argv = ["scan", str(run), "--metrics", "prefix_matching,fv", "--task", str(task)]
    assert main([*argv, "--out", str(out)]) == 0
    heatmaps = (out / "heatmaps.html").read_text(encoding="utf-8")
    assert heatmaps.count("fv skipped: no task is done above chance") == 1  # once, both named
    assert "(1 tried), so no head has a score" in heatmaps and "(at step 0, step 1)" in heatmaps
    assert "fv per head" in heatmaps  # the slider over the two checkpoints that have it

    one = tmp_path / "one"
    last = run / "checkpoints" / "step-000008"
    argv = ["scan", str(last), "--metrics", "prefix_matching,fv", "--task", str(task)]
    assert main([*argv, "--out", str(one)]) == 0
    single = (one / "heatmaps.html").read_text(encoding="utf-8")
    assert "FV score and prefix matching" in single and "fv skipped" not in single
    capsys.readouterr()
