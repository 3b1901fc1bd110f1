"""End to end: train a tiny 2-layer model until induction heads form, then find when they did."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ihprobe import data
from ihprobe.cli import main
from ihprobe.dynamics.changepoint import run_emergence
from lab.studies.toy_law.periodic import Periodic


@pytest.mark.slow
def test_transition_is_found_where_prefix_matching_jumps(tmp_path, monkeypatch, capsys, cache_dir):
    from ihprobe.training.trainer import TrainConfig, train

    monkeypatch.setitem(data.PRODUCERS, "periodic", Periodic)
    config = TrainConfig(
        out=str(tmp_path / "run"),
        producer="periodic",
        producer_options={},
        layers=2,
        heads=4,
        d_model=64,
        context=64,
        batch_size=32,
        steps=560,
        lr=3e-3,
        schedule="constant",
        n_checkpoints=12,
        progress=False,
    )
    run = train(config)
    scan = {"n": 16, "batch": 20}
    point = run_emergence(run, "prefix_matching", **scan)
    assert point.transition, point.reason
    assert (point.batch_size, point.context) == (32, 64)
    ps = point.curve  # the max-PS trajectory the point was found on
    values, tokens = ps["value"].to_numpy(), ps["tokens"].to_numpy()
    assert values[0] < 0.1 and values[-1] > 0.5, values  # induction heads formed in training
    jump = int(np.argmax(np.diff(values)))  # PS jumps most between checkpoints jump, jump+1
    assert tokens[jump - 1] <= point.tokens_low <= tokens[jump], (tokens, point)
    assert point.tokens_low <= point.tokens < point.tokens_high
    assert point.updates == pytest.approx(point.tokens / (32 * 64))
    assert point.threshold_tokens == tokens[np.argmax(values >= 0.3)]
    # the CLI reports the same point, from the cache
    assert main(["emergence", str(run), "-n", "16", "--batch", "20", "--json"]) == 0
    (reported,) = json.loads(capsys.readouterr().out)
    assert reported["tokens"] == pytest.approx(point.tokens)
    assert reported["predicted_updates"] > 0
    assert reported["notes"] == []  # periods vary per row: heads that match content, not offset
    assert main(["emergence", str(run), "-n", "16", "--batch", "20"]) == 0
    # the line names its probe: the trainer's live probes use other rows, so their max PS differs
    assert f"first >= 0.3 at {point.threshold_tokens:,.0f} tokens (probe: 20 rows, seed 0)" in (
        capsys.readouterr().out
    )
