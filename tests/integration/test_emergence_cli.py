"""CLI of predict / emergence, sweep planning and summaries, and the emergence figures."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pandas as pd
import pytest

from ihprobe.cli import main
from ihprobe.dynamics.changepoint import emergence
from ihprobe.dynamics.law import LAWS, fit_law, predict_emergence
from ihprobe.figures.emergence import (
    frontier_figure,
    head_strip_figure,
    law_figure,
    trajectory_figure,
)
from ihprobe.io.runs import data_means, is_finished
from ihprobe.jobs import sweep


def test_predict_json(capsys):
    assert main(["predict", "-B", "16", "-C", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["updates"] == pytest.approx(20403.53, abs=0.01)  # bc -l, see test_law
    assert out["tokens"] == pytest.approx(20403.53 * 16 * 64, rel=1e-6)
    assert main(["predict", "-B", "4", "-C", "64", "--law", "sqrt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == pytest.approx(10**5.7 * 16)


def test_predict_text_and_errors(capsys):
    assert main(["predict", "-B", "4", "-C", "64"]) == 0
    assert "34,077 updates" in capsys.readouterr().out
    assert main(["predict", "-B", "-1", "-C", "64"]) == 2
    assert "positive" in capsys.readouterr().err


def test_emergence_cli_on_a_bad_path(capsys, tmp_path):
    assert main(["emergence", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_sweep_plan_names_runs_and_builds_train_commands(tmp_path):
    runs = sweep.plan(["batch_size=4,8", "repetition=0.1,0.9"], tmp_path)
    assert [r.name for r in runs] == [
        "batch_size=4_repetition=0.1",
        "batch_size=4_repetition=0.9",
        "batch_size=8_repetition=0.1",
        "batch_size=8_repetition=0.9",
    ]
    cmd = runs[1].train_command(("--steps", "10"))
    assert cmd[:4] == [sys.executable, "-m", "ihprobe", "train"]
    assert cmd[cmd.index("--batch-size") + 1] == "4"  # a TrainConfig field becomes its flag
    assert cmd[cmd.index("--option") + 1] == "repetition=0.9"  # anything else a producer option
    assert cmd[-3:] == ["--steps", "10", "--no-progress"]
    assert not is_finished(runs[0].out)
    with pytest.raises(sweep.IhprobeError, match="KEY=V1"):
        sweep.plan(["batch_size"], tmp_path)


def _sweep_table() -> pd.DataFrame:
    rows = []
    for B in (4, 8, 16):
        for C in (32, 64):
            rows.append(
                {
                    "run": f"B{B}C{C}",
                    "batch_size": B,
                    "context": C,
                    "transition": True,
                    "updates": LAWS["fitted"].updates(B, C),
                    "repetition": B / 20,
                    "reliability": C / 80,
                }
            )
    rows[0]["transition"], rows[0]["updates"] = False, None
    return pd.DataFrame(rows)


def test_sweep_report_fits_the_law_and_maps_the_frontier(tmp_path):
    written = sweep.report(_sweep_table(), tmp_path)
    law = json.loads(written["law"].read_text())
    assert law["b"] == pytest.approx(0.37) and law["c"] == pytest.approx(0.62)
    assert law["n"] == 5  # a table from before law_updates: the run without one is left out
    page = written["report"].read_text()
    assert "Frontier" in page and "The law" in page
    assert pd.read_csv(written["table"]).shape[0] == 6
    table = _sweep_table()  # as summarize writes it now: the stopped run kept as a bound
    table["law_updates"], table["censored"] = table["updates"], False
    table.loc[0, ["law_updates", "censored"]] = [LAWS["fitted"].updates(4, 32) / 2, True]
    law = json.loads(sweep.report(table, tmp_path / "now")["law"].read_text())
    assert (law["n"], law["censored"]) == (6, 1) and law["b"] == pytest.approx(0.37, abs=0.02)
    assert "1 of them censored" in (tmp_path / "now" / "sweep.html").read_text()


def test_figures_mark_the_point_and_the_prediction():
    tokens = np.array([0] + [1000 * 2**k for k in range(10)])
    rows = []
    for i, t in enumerate(tokens):
        for head in range(2):
            rows.append((t // 100, t, 1, head, "prefix_matching", 0.9 if i > 5 and head else 0.02))
        rows.append((t // 100, t, None, None, "ar_accuracy", 0.8 if i > 6 else 0.0))
    table = pd.DataFrame(rows, columns=["step", "tokens", "layer", "head", "metric", "value"])
    table = table.assign(model="run", revision=None)
    point = emergence(table)
    near = dataclasses.replace(predict_emergence(4, 25), tokens=point.tokens * 3)
    fig = trajectory_figure(
        table,
        point,
        near,
        losses=pd.DataFrame({"tokens": tokens[1:], "loss": np.linspace(5, 2, 10)}),
    )
    assert {t.name for t in fig.data} == {"max prefix matching", "AR accuracy", "training loss"}
    assert fig.layout.yaxis2.tickmode == "auto"  # the loss axis's own ticks, not the score's
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert sorted(s.x0 for s in lines) == sorted([point.tokens, near.tokens])
    band = [(s.x0, s.x1, s.yref) for s in fig.layout.shapes if s.type == "rect"]
    assert band == [(point.tokens_low, point.tokens_high, "y domain")]
    for factor, law_later in ((0.1, False), (10, True)):  # a law before, then after, the point
        prediction = dataclasses.replace(predict_emergence(4, 25), tokens=point.tokens * factor)
        labels = trajectory_figure(table, point, prediction).layout.annotations
        sides = {a.text.split()[0]: a.xanchor for a in labels}
        # the two labels face away from each other, so neither line crosses the other's text
        away = ("right", "left") if law_later else ("left", "right")
        assert (sides["emergence"], sides["[A]'s"]) == away
        assert "published law" in " ".join(a.text for a in labels)  # not called a fit
    flat = dataclasses.replace(point, transition=False, tokens=None, updates=None)
    labels = trajectory_figure(table, flat, near).layout.annotations
    assert [a.text.split()[0] for a in labels] == ["[A]'s"]  # no point to place: the law alone
    # a prediction far past the run is named at the axis edge, not drawn on a stretched axis
    far = dataclasses.replace(near, tokens=float(tokens.max()) * 40)
    figure = trajectory_figure(table, point, far)
    assert [s.x0 for s in figure.layout.shapes if s.type == "line"] == [point.tokens]
    (note,) = [a for a in figure.layout.annotations if "off this axis" in a.text]
    # above the plot area (paper y >= 1, growing upwards): clear of the curves and the x ticks
    assert (note.yref, note.yanchor) == ("paper", "bottom") and note.y >= 1
    strip = head_strip_figure(table)
    assert strip.data[0].z.shape == (2, len(tokens)) and strip.data[0].y == ("L1H0", "L1H1")
    fit = fit_law([(4, 32, 3000), (8, 32, 2000), (8, 64, 1500), (16, 64, 1000)])
    assert len(law_figure(fit, reference="fitted").data) == 3
    frontier = frontier_figure(_sweep_table())
    assert list(frontier.data[1].text) == ["none"]


def _fake_run(run_dir, steps: int, done: bool):
    """A run directory as ihprobe train leaves it: run.json, and the final checkpoint if done."""
    run_dir.mkdir(parents=True)
    config = {"steps": steps, "batch_size": 4, "context": 32}
    (run_dir / "run.json").write_text(json.dumps({"config": config, "steps": steps}))
    (run_dir / "metrics.jsonl").write_text(
        "\n".join(
            json.dumps({"step": s, "data": {"repetition": r}}) for s, r in ((1, 0.2), (2, 0.4))
        )
    )
    if done:
        final = run_dir / "checkpoints" / f"step-{steps:06d}"
        final.mkdir(parents=True)
        (final / "config.json").write_text("{}")


def test_sweep_trains_only_unfinished_runs_and_resumes_started_ones(tmp_path, monkeypatch):
    runs = sweep.plan(["batch_size=4", "context=16,32,64"], tmp_path)
    _fake_run(runs[0].out, 10, done=True)
    _fake_run(runs[1].out, 10, done=False)
    launched = []

    class Proc:
        def __init__(self, cmd, **kwargs):
            self.cmd = cmd
            launched.append(cmd)

        def wait(self):
            return 0 if "--resume" in self.cmd else 3

    monkeypatch.setattr(sweep.subprocess, "Popen", Proc)
    status = sweep.train_all(runs, ("--steps", "10"), jobs=2)
    assert is_finished(runs[0].out) and not is_finished(runs[1].out)
    assert [cmd[cmd.index("--out") + 1] for cmd in launched] == [str(runs[1].out), str(runs[2].out)]
    assert "--resume" in launched[0] and "--resume" not in launched[1]
    assert status == {runs[1].name: 0, runs[2].name: 3}
    assert data_means(runs[0].out, ("repetition",)) == {"repetition": pytest.approx(0.3)}


def test_fit_law_cli_refits_from_run_points(tmp_path, monkeypatch, capsys):
    from ihprobe.dynamics import changepoint
    from ihprobe.dynamics.changepoint import EmergencePoint

    law = LAWS["fitted"]
    shapes = {"a": (4, 32), "b": (8, 32), "c": (8, 64), "d": (16, 128)}

    def planted(run_dir, **kwargs):
        B, C = shapes[run_dir]
        return EmergencePoint(
            "prefix_matching",
            "max",
            True,
            updates=law.updates(B, C),
            batch_size=B,
            context=C,
            model=run_dir,
        )

    monkeypatch.setattr(changepoint, "run_emergence", planted)
    assert main(["fit-law", *shapes, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert (fit["b"], fit["c"], fit["n"]) == (pytest.approx(0.37), pytest.approx(0.62), 4)
    assert main(["fit-law", *shapes]) == 0
    assert "r = 1.000, b SE 0.000, c SE 0.000" in capsys.readouterr().out
    assert main(["fit-law", "b", "d", "--c", "0.62"]) == 0  # two runs, two free parameters
    said = capsys.readouterr().out
    assert "an exact fit" in said and "r = " not in said  # an r of 1 that says nothing
    shapes["e"] = (4, 64)  # a run that stopped before its heads formed: a lower bound
    never = EmergencePoint(
        "prefix_matching",
        "max",
        False,
        batch_size=4,
        context=64,
        model="e",
        curve=pd.DataFrame({"step": [0, 100, 50_000]}),
    )
    monkeypatch.setattr(
        changepoint, "run_emergence", lambda r, **k: never if r == "e" else planted(r)
    )
    assert main(["fit-law", *shapes]) == 0
    assert "(5 runs, 1 censored (no placed point" in capsys.readouterr().out


@pytest.mark.slow
def test_sweep_cli_trains_through_ihprobe_train_and_skips_it_the_second_time(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--out",
        str(out),
        "--grid",
        "batch_size=2",
        "--grid",
        "context=16",
        "-n",
        "4",
        "--batch",
        "4",
        "--",
        "--producer",
        "iid",
        "--steps",
        "12",
        "--layers",
        "1",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--n-checkpoints",
        "8",
    ]
    assert main(args) == 0
    table = pd.read_csv(out / "sweep.csv")
    assert table["run"].tolist() == ["batch_size=2_context=16"]
    assert not table["transition"].iloc[0]  # i.i.d. tokens: no induction heads ([A])
    assert (table["batch_size"].iloc[0], table["context"].iloc[0]) == (2, 16)
    log = out / "runs" / "batch_size=2_context=16.log"
    size = log.stat().st_size
    assert main(args) == 0  # finished: not trained again, nothing appended to its log
    assert log.stat().st_size == size
    assert (out / "sweep.html").is_file()


def _curve_table(steps, values) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": "run",
            "revision": None,
            "step": steps,
            "tokens": [s * 1024 for s in steps],
            "layer": 1,
            "head": 0,
            "metric": "prefix_matching",
            "value": values,
        }
    )


def test_a_rise_cut_off_by_the_end_of_training_is_reported_as_a_lower_bound():
    from ihprobe.cli.emergence import describe

    steps = [int(1.3**k) for k in range(8, 40)]
    rise = [0.02 + 0.8 / (1 + np.exp(-4 * (np.log10(s) - 3.3))) for s in steps]
    kwargs = {"batch": 100, "seed": 0}
    whole = emergence(_curve_table(steps, rise), batch_size=8, context=128)
    assert whole.transition and not whole.at_edge and "~" in describe(whole, kwargs)
    flat = 0.05 + 0.003 * np.random.default_rng(0).standard_normal(len(steps) - 1)
    cut = emergence(_curve_table(steps, [*flat, 0.6]), batch_size=8, context=128)  # at the end
    said = describe(cut, kwargs)
    assert cut.transition and cut.at_edge and "a lower bound" in said and ">=" in said
    assert cut.updates_high == steps[-1]
    figure_labels = [
        a.text
        for a in trajectory_figure(_curve_table(steps, [*flat, 0.6]), cut, None).layout.annotations
    ]
    assert any(t.startswith("emergence >=") for t in figure_labels)  # the page says it too
