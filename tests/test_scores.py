"""HeadScores: the long table, top heads and heatmaps, on scores with known values."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.figures.heads import head_heatmap
from ihprobe.io.provenance import COLUMNS, Provenance
from ihprobe.probes.scores import HeadScores


def make(step=100, tokens=6400):
    ps = torch.tensor([[0.1, 0.9, 0.2], [0.5, float("nan"), 0.7]])
    return HeadScores(
        head={"prefix_matching": ps, "copying": -ps},
        model={"ar_accuracy": 0.25},
        provenance=Provenance("run-a", None, step, tokens),
        settings={"n": 50},
    )


def test_to_frame_is_the_long_table():
    frame = make().to_frame()
    assert tuple(frame.columns) == COLUMNS
    assert len(frame) == 2 * 6 + 1
    row = frame[(frame.metric == "prefix_matching") & (frame.layer == 1) & (frame["head"] == 2)]
    assert row.value.item() == pytest.approx(0.7)
    model_row = frame[frame.metric == "ar_accuracy"]
    assert model_row.layer.isna().all() and model_row["head"].isna().all()
    assert model_row.value.item() == 0.25
    assert (frame.step == 100).all() and (frame.tokens == 6400).all()
    assert str(frame.layer.dtype) == "Int64" and str(frame.step.dtype) == "Int64"


def test_frames_of_many_checkpoints_concatenate_with_integer_columns():
    both = pd.concat([make(step=None, tokens=None).to_frame(), make().to_frame()])
    assert str(both.step.dtype) == "Int64" and both.step.isna().sum() == 13
    assert str(both.layer.dtype) == "Int64"


def test_top_heads_best_first_nan_last():
    scores = make()
    assert scores.top_heads("prefix_matching", 3) == [
        (0, 1, pytest.approx(0.9)),
        (1, 2, pytest.approx(0.7)),
        (1, 0, pytest.approx(0.5)),
    ]
    assert scores.top_heads("prefix_matching", 6)[-1][:2] == (1, 1)
    with pytest.raises(IhprobeError, match="they hold prefix_matching, copying"):
        scores.top_heads("ar_accuracy")


def test_heatmap_is_layer_by_head_with_values_on_hover():
    fig = head_heatmap(make(), "prefix_matching")
    heat = fig.data[0]
    assert list(heat.x) == [0, 1, 2] and list(heat.y) == [0, 1]
    assert heat.z[1][2] == pytest.approx(0.7)
    assert "%{z" in heat.hovertemplate and "prefix_matching" in heat.hovertemplate
    assert "run-a" in fig.layout.title.text and "step 100" in fig.layout.title.text


def test_from_frame_inverts_to_frame_and_refuses_mixed_checkpoints():
    scores = make()
    again = HeadScores.from_frame(scores.to_frame(), settings={"n": 50})
    assert again.provenance == scores.provenance and again.settings == scores.settings
    assert again.model == scores.model
    for metric, values in scores.head.items():
        assert torch.equal(again.head[metric].isnan(), values.isnan())
        assert torch.allclose(again.head[metric].nan_to_num(), values.nan_to_num())
    mixed = pd.concat([make(step=1).to_frame(), make(step=2).to_frame()])
    with pytest.raises(IhprobeError, match="long table of one checkpoint"):
        HeadScores.from_frame(mixed)
