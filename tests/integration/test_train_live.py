"""Live probes and what the trainer shows: probes reuse the training weights in memory, the bar
ends on the last probe and the forecast's detection, and the command says whether heads formed."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from ihprobe.core.stages import is_stage
from ihprobe.dynamics.forecast import FORECAST
from ihprobe.io.runs import PROBES, RUN_META, RunDir
from ihprobe.training.display import FORMED, Display, outcome
from ihprobe.training.trainer import TrainConfig, train
from tests.helpers import TINY_TRAIN

# The demo's run with a 16-wide MLP (nearly attention-only, twice as fast): heads form between
# 300 and 350 updates (seed 0; measured: max PS 0.27 at 300, 0.84 at 350)
EMERGES = [
    "--producer",
    "repeats",
    "--option",
    "base=iid",
    "--option",
    "vocab_size=64",
    "--option",
    "period=[4, 16]",
    "--option",
    "start=[0, 4]",
    "--layers",
    "2",
    "--heads",
    "4",
    "--d-model",
    "64",
    "--d-mlp",
    "16",
    "-C",
    "64",
    "-B",
    "32",
    "--lr",
    "3e-3",
    "--schedule",
    "constant",
    "--steps",
    "400",
    "--checkpoints",
    "linear",
    "--n-checkpoints",
    "8",
    "--probe-batch",
    "8",
    "--log-every",
    "10",
    "--device",
    "cpu",
    "--live-probes",
    "--forecast",
]


def probe(step: int, ps: float, head=(1, 3)) -> dict:
    return {
        "step": step,
        "tokens": step * 64,
        "max_prefix_matching": ps,
        "top_head": list(head),
        "ar_accuracy": 0.5,
    }


def test_the_bar_keeps_the_last_probe_and_forecast_in_memory():
    shown = Display(total=10, start=0, enabled=False)
    shown.logged(2.5, 1000.0)
    shown.probed(probe(5, 0.04, (0, 1)), None)
    shown.logged(2.1, 1200.0)
    shown.probed(probe(10, 0.745), None)
    assert shown.postfix() == {"loss": "2.100", "tok/s": "1,200", "max PS": "0.74 (L1H3)"}


def test_off_a_terminal_the_bar_is_off_and_each_log_and_probe_is_a_stage_line(caplog):
    caplog.set_level(logging.INFO, logger="ihprobe")
    ticks = iter([0.0, 600.0, 600.0])  # the clock at the start and at each line
    shown = Display(total=100, start=40, enabled=True, clock=lambda: next(ticks))
    assert shown.bar.disable  # pytest's stderr is not a terminal
    for _ in range(10):
        shown.advance()
    shown.logged(2.5, 1000.0)
    shown.probed(probe(50, 0.31), None)
    stages = [r.getMessage() for r in caplog.records if is_stage(r)]
    assert stages == [
        "update 50/100, loss 2.500, tok/s 1,000, about 50 min left",  # 10 in 10 min, 50 to go
        "update 50/100, loss 2.500, tok/s 1,000, max PS 0.31 (L1H3), about 50 min left",
    ]
    caplog.clear()
    quiet = Display(total=100, start=0, enabled=False)
    quiet.logged(2.5, 1000.0)
    assert quiet.bar.disable and not caplog.records


def test_outcome_says_formed_by_detection_or_threshold_and_not_yet_below_it(tmp_path):
    run = RunDir(tmp_path)
    assert outcome(tmp_path) is None  # no live probes: nothing to say
    run.write_json(RUN_META, {"config": {}})
    run.append(PROBES, probe(100, FORMED - 0.01, (0, 2)))
    assert outcome(tmp_path).startswith("no induction heads yet")
    assert "max prefix matching 0.290 at L0H2" in outcome(tmp_path)
    run.append(PROBES, probe(200, FORMED + 0.01))
    assert outcome(tmp_path).startswith("induction heads formed (max prefix matching above 0.3)")
    found = {"updates": 150.0, "updates_low": 100.0, "updates_high": 200.0}
    run.write_json(RUN_META, {"config": {}, "emergence": found})
    said = outcome(tmp_path)
    assert said.startswith("induction heads formed: emergence detected at ~150 updates (100-200)")
    assert "last probe (update 200): max prefix matching 0.310 at L1H3" in said


@pytest.mark.slow
def test_live_probes_load_the_probe_model_once_and_then_swap_weights_in(tmp_path, monkeypatch):
    import ihprobe.training.live as live

    loads = []
    real = live.load

    def counted(*args, **kwargs):
        loads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(live, "load", counted)
    config = TrainConfig(
        **{**TINY_TRAIN, "n_checkpoints": 4},
        out=str(tmp_path / "run"),
        live_probes=True,
        probe_batch=8,
    )
    run = train(config)
    assert [r["step"] for r in RunDir(run).records(PROBES)] == [0, 2, 4, 6, 8]
    assert len(loads) == 1  # the step-0 checkpoint; later probes read no checkpoint


@pytest.mark.slow
def test_a_run_that_emerges_ends_with_the_last_probe_and_says_heads_formed(
    tmp_path, capsys, monkeypatch
):
    from ihprobe.cli import main

    reads = []
    records = RunDir.records

    def counted(self, name):
        reads.append(name)
        return records(self, name)

    monkeypatch.setattr(RunDir, "records", counted)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the bar, no stages
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), *EMERGES]) == 0
    shown = capsys.readouterr()
    run = RunDir(out)
    probes, forecasts = run.records(PROBES), run.records(FORECAST)
    last = probes[-1]
    assert last["step"] == 400 and last["max_prefix_matching"] > 0.5  # heads formed
    assert forecasts[-1]["detected"]
    # the bar's final line shows that last probe and the detection, not an earlier state
    final = shown.err.replace("\r", "\n").strip().splitlines()[-1]
    layer, head = last["top_head"]
    assert f"max PS={last['max_prefix_matching']:.2f} (L{layer}H{head})" in final
    assert "emergence=emerged ~" in final
    # and the command says so, with the numbers in run.json
    found = json.loads((out / RUN_META).read_text())["emergence"]
    said = shown.out.strip().splitlines()[-1]
    assert said.startswith(
        f"induction heads formed: emergence detected at ~{found['updates']:,.0f}"
    )
    assert f"max prefix matching {last['max_prefix_matching']:.3f}" in said
    # probes.jsonl read once per probe (the forecast), at the start, for the closing sentence
    # and by this test; a display that re-read it per log line would add 40 (400 / log_every 10)
    assert reads.count(PROBES) <= len(probes) + 3
