"""Small refusals of issue 59 (item 12): ``ablate --over-training`` of one checkpoint is one line
(before: a one-point "trajectory"); ``train`` takes a dict of TrainConfig's fields, and refuses
a dict with a field it lacks, or anything else, in one line (before: AttributeError)."""

from __future__ import annotations

import pytest

import ihprobe
from ihprobe.training.trainer import as_config
from tests.helpers import TINY_TRAIN, cli_refused, one_line, valid_checkpoint


def test_over_training_of_one_checkpoint_is_refused(tmp_path, capsys, monkeypatch):
    checkpoint = valid_checkpoint(tmp_path / "ckpt")
    line = cli_refused(
        ["ablate", str(checkpoint), "--over-training"],
        tmp_path,
        capsys,
        monkeypatch,
        "--over-training needs at least two checkpoints",
    )
    assert "ckpt" in line


def test_train_takes_a_dict_of_the_configs_fields(tmp_path):
    run = ihprobe.train({**TINY_TRAIN, "out": str(tmp_path / "run")})
    assert len(ihprobe.checkpoints(run)) >= 2
    assert as_config({"steps": 5}) == ihprobe.TrainConfig(steps=5)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"stpes": 5}, "TrainConfig has no field stpes"),
        ({"steps": 5, 3: 1}, "TrainConfig has no field 3"),
        ("runs/x", "config must be a TrainConfig or a dict (got str)"),
        (None, "config must be a TrainConfig or a dict (got NoneType)"),
        # wrongly typed values of known fields (before: AttributeError or TypeError in training)
        ({"steps": "ten"}, "steps must be an integer (got 'ten')"),
        ({"d_model": 1.5}, "d_model must be an integer (got 1.5)"),
        ({"layers": None}, "layers must be an integer (got None)"),
        ({"lr": "fast"}, "lr must be a number (got 'fast')"),
        ({"warmup": float("nan")}, "warmup=nan must be a finite number"),
        ({"live_probes": "yes"}, "live_probes must be True or False"),
        ({"producer": 3}, "producer must be a string (got 3)"),
        ({"producer_options": ["vocab_size=64"]}, "producer_options must be a dict of options"),
        ({"checkpoints": ("1M", "2M")}, "checkpoints must be an integer (got '1M')"),
        ({"checkpoints": 5}, "checkpoints must be a name or a tuple of int values"),
        ({"law_from": "runs/a"}, "law_from must be a tuple of str values"),
    ],
)
def test_train_refuses_what_is_not_a_config_in_one_line(bad, match):
    assert match in one_line(lambda: ihprobe.train(bad))
