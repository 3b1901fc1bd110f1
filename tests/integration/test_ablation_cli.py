"""``ihprobe ablate`` over a run directory, the report in a real browser, and input errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ihprobe
from ihprobe.cli import main
from tests.browser import render
from tests.helpers import save_checkpoint, tiny_hf_model

STEPS = (0, 10, 100)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tokenizer):
    root = tmp_path_factory.mktemp("run")
    for i, step in enumerate(STEPS):
        directory = root / "checkpoints" / f"step-{step:06d}"
        save_checkpoint(tiny_hf_model("gpt-neox", seed=i, context=64), directory, tokenizer)
        meta = {"step": step, "tokens": step * 1024, "run": "demo"}
        (directory / "ihprobe.json").write_text(json.dumps(meta))
    (root / "run.json").write_text("{}")
    return root


@pytest.mark.slow
def test_ablate_a_run_writes_csv_and_report(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "ablate",
        str(run_dir),
        "--out",
        str(out),
        "--draws",
        "3",
        "--batch",
        "6",
        "--metrics",
        "induction_loss,natural_loss",
        "--mode",
        "zero",
        "--all-checkpoints",
        "--scope",  # [B]'s per-layer protocol, a named option (the default is the global top 3)
        "layer",
        "--top",
        "0.02",
    ]
    assert main(argv) == 0
    frame = pd.read_csv(out / "ablation.csv")
    assert sorted(frame.step.unique()) == list(STEPS)
    assert sorted(frame.tokens.unique()) == [s * 1024 for s in STEPS]
    assert (frame.model == "demo").all()
    per_ckpt = frame.groupby("step")
    assert (per_ckpt.apply(lambda f: (f.metric == "top_set").sum()) == 8).all()
    assert (per_ckpt.apply(lambda f: f.query("metric == 'top_set'").value.sum()) == 2).all()
    found = set(zip(frame.metric, frame.statistic, strict=True))
    assert {("induction_loss", "p_value"), ("natural_loss", "relative_change")} <= found
    printed = capsys.readouterr().out
    assert printed.count(": top set ") == len(STEPS) and "wrote" in printed
    page = (out / "report.html").read_text()
    assert "<script src=" not in page and page.count("plotly.js v") == 1
    assert "Signature vs load-bearing over training" in page
    rendered = render(out / "report.html")
    assert rendered.errors == []
    # 1 curve + per checkpoint a head-set heatmap and a drop chart
    assert rendered.count(r'class="main-svg"') >= 1 + 2 * len(STEPS)
    assert main(argv) == 2  # outputs exist: refuse without --force
    assert "pass --force" in capsys.readouterr().err


def test_result_figure_and_single_checkpoint_report(run_dir, tmp_path):
    from ihprobe.figures.ablation import drop_figure, write_ablation_report

    model = ihprobe.load(run_dir / "checkpoints" / "step-000010")
    result = ihprobe.ablate(model, random=3, batch=4, metrics=["induction_loss", "ar_accuracy"])
    fig = drop_figure(result)
    assert len(fig.data) == 4  # random box + top marker for each metric
    v = result.values["induction_loss"].double()
    assert fig.data[1].y[0] == pytest.approx(float((v[1] - v[0]) / v[0]))
    page = write_ablation_report(tmp_path / "r.html", [result]).read_text()
    assert "over training" not in page and "L0H" in page


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--top", "0"], "--top: '0' is not a fraction in (0, 1] nor a count k >= 1"),
        (["--top", "1.5"], "--top: '1.5' is not a fraction in (0, 1] nor a count k >= 1"),
        (["--scope", "model"], "--scope: invalid choice: 'model'"),
        (["--baseline", "matched"], "--baseline: invalid choice: 'matched'"),
        (["--mode", "half"], "--mode: invalid choice: 'half'"),
        (["--draws", "0"], "--draws: '0' is not a positive integer"),
        (["--metrics", "bleu"], "unknown metric"),
        (["--by", "bleu"], "unknown head score --by bleu"),
    ],
)
def test_bad_flags_fail_in_one_line_before_loading(tmp_path, capsys, flags, message):
    assert main(["ablate", "org/missing-model", *flags]) == 2  # the source is never read
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0


@pytest.mark.slow
def test_over_training_table_report_and_cache(run_dir, tmp_path, capsys, monkeypatch, cache_dir):
    from ihprobe.dynamics import ablation_series
    from ihprobe.io.provenance import csv_table

    out = tmp_path / "over"
    argv = [
        "ablate",
        str(run_dir),
        "--out",
        str(out),
        "--over-training",
        "--scope",
        "global",
        "--top",
        "1",
        "--draws",
        "3",
        "--batch",
        "4",
        "--metrics",
        "induction_loss",
    ]
    assert main(argv) == 0
    frame = pd.read_csv(out / "ablation.csv")
    assert sorted(frame.step.unique()) == list(STEPS)
    effects = frame[(frame.metric == "induction_loss") & (frame.statistic == "head_change")]
    per_step = effects.groupby("step").size()
    assert (per_step == 2 * 4).all()  # every head of every checkpoint
    assert (frame[frame.metric == "top_set"].groupby("step").value.sum() == 1).all()  # global
    page = (out / "report.html").read_text()
    assert "Signature vs load-bearing over training" in page and "over training" in page

    def no_ablation(*args, **kwargs):
        raise AssertionError("a cached checkpoint was ablated again")

    monkeypatch.setattr(ablation_series, "ablate", no_ablation)
    again = ihprobe.ablation_trajectory(
        run_dir, scope="global", top=1, random=3, batch=4, metrics=["induction_loss"]
    )
    tidy = csv_table(again)  # the CSV's tidy shape of the same table
    assert len(again) == len(frame) and set(tidy.metric) == set(frame.metric)


def test_cli_choices_are_the_librarys():
    from ihprobe.causal import choices
    from ihprobe.cli import ablate as cli

    library = (choices.SCOPES, choices.BASELINES, choices.MODES)
    assert (cli.SCOPES, cli.BASELINES, cli.MODES) == library
    assert choices.SCOPES == ("layer", "global") and "pattern" in choices.MODES


def test_load_bearing_curve_marks_index_two_on_its_own_axis():
    from ihprobe.figures.ablation_series import load_bearing_figure

    rows = []
    for tokens, ps, index in ((1024, 0.02, 0.5), (2048, 0.6, 14.0), (4096, 0.9, -3.0)):
        rows += [
            {"tokens": tokens, "metric": "prefix_matching", "value": ps},
            {"tokens": tokens, "metric": "induction_loss.load_bearing_index", "value": index},
            {"tokens": tokens, "metric": "induction_loss.load_bearing_lo", "value": index - 1},
            {"tokens": tokens, "metric": "induction_loss.load_bearing_hi", "value": index + 1},
        ]
    fig = load_bearing_figure(pd.DataFrame(rows), "induction_loss", "prefix_matching")
    (label,) = [a for a in fig.layout.annotations if a.text == "index 2"]
    assert (label.yref, label.y) == ("y2", 2)  # read on the index axis, not the score axis
    assert fig.layout.yaxis2.tickmode == "auto"  # round ticks rather than the score grid's
    assert list(fig.data[-1].y) == [0.5, 14.0, -3.0]
