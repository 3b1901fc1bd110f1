"""``ihprobe scan``: a run directory swept into one table through one skeleton."""

from __future__ import annotations

import pandas as pd
import torch

import ihprobe
from ihprobe.cli import main
from ihprobe.io import models
from tests.helpers import fake_run


def test_scan_cli_sweeps_a_run_with_one_skeleton(tmp_path, capsys, monkeypatch):
    run = fake_run(tmp_path / "run", [0, 40, 200])
    loads = []
    real_load = models.load
    monkeypatch.setattr(models, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    out = tmp_path / "out"
    metrics = "prefix_matching,copying,ar_accuracy"
    argv = ["scan", str(run), "--metrics", metrics, "--batch", "8", "--out", str(out)]
    assert main(argv) == 0
    assert len(loads) == 1  # the other checkpoints were swapped into the same skeleton
    frame = pd.read_csv(out / "scores.csv")
    assert sorted(frame.step.unique()) == [0, 40, 200]
    assert sorted(frame.tokens.unique()) == [0, 40 * 1024, 200 * 1024]
    assert set(frame.metric) == {"prefix_matching", "copying", "ar_accuracy"}
    assert (frame.model == "fake").all()
    # each checkpoint's rows equal a fresh scan of that checkpoint
    last = ihprobe.checkpoints(run)[-1]
    fresh = ihprobe.scan(models.load(last.source), ["copying"], batch=8).head["copying"]
    rows = frame[(frame.step == 200) & (frame.metric == "copying")].sort_values(["layer", "head"])
    assert torch.allclose(torch.tensor(rows.value.to_numpy()).float(), fresh.flatten(), atol=1e-6)
    html = (out / "heatmaps.html").read_text()
    assert "prefix_matching" in html and "<script src=" not in html
    printed = capsys.readouterr().out
    assert "top prefix_matching: L" in printed and "ar_accuracy:" in printed
    d_vocab = models.load(last.source).cfg.d_vocab  # a uniform guess is right 1 / V of the time
    accuracy = next(line for line in printed.splitlines() if "ar_accuracy:" in line)
    assert accuracy.endswith(f"(chance {1 / d_vocab:.3g})")


def test_scan_cli_bad_metric_is_one_line(tmp_path, capsys):
    run = fake_run(tmp_path / "run", [0])
    capsys.readouterr()
    code = main(["scan", str(run), "--metrics", "ps", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "valid metrics are prefix_matching" in err
    assert err.strip().count("\n") == 0


def test_scan_cli_text_feeds_icl_and_never_overwrites_silently(tmp_path, capsys):
    run = fake_run(tmp_path / "run", [0])
    text = tmp_path / "t.txt"
    text.write_text("".join(f"<{i % 50}>" for i in range(400)))
    out = tmp_path / "o"
    argv = ["scan", str(run), "--metrics", "icl_score", "--text", str(text), "--out", str(out)]
    assert main(argv) == 0
    frame = pd.read_csv(out / "scores.csv")
    assert list(frame.metric) == ["icl_score"] and frame.layer.isna().all()
    capsys.readouterr()
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
