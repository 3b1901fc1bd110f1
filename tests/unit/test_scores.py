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
    # the one long-table shape every CSV starts with, pinned here; other tests read COLUMNS
    assert COLUMNS == ("model", "revision", "step", "tokens", "layer", "head", "metric", "value")
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


def uniform_varied_chance(shortest: int, longest: int) -> float:
    """A uniform head's forward induction on ``[S, SEP, S]``, pooled over |S| = shortest ..
    longest, written out by hand: query ``L + 1 + k`` sees ``L + 2 + k`` keys, k = 0 .. L - 2."""
    values = [1 / (L + 2 + k) for L in range(shortest, longest + 1) for k in range(L - 1)]
    return sum(values) / len(values)


def test_a_varied_score_s_chance_and_suspects_follow_the_scan_s_own_lengths():
    """A scan over short snippets (|S| 4-6) has a far higher chance level than the default
    10-30; a fixed-offset head scoring between twice the two is a suspect only at its own."""
    ps = torch.tensor([[0.9, 0.9]])
    varied = torch.tensor([[0.95, 0.15]])  # 2 x 0.033 < 0.15 < 2 x 0.119
    head = {"prefix_matching": ps, "forward_induction_varied": varied}
    short = HeadScores(head, {}, Provenance("m"), settings={"snippet_lengths": [4, 6]})
    unrecorded = HeadScores(head, {}, Provenance("m"), settings={})
    assert short.chance("forward_induction_varied") == pytest.approx(uniform_varied_chance(4, 6))
    assert unrecorded.chance("forward_induction_varied") is None  # no vocabulary recorded
    assert [(layer, h) for layer, h, *_ in short.fixed_offset_suspects()] == [(0, 1)]
    assert unrecorded.fixed_offset_suspects() == []  # the default lengths' chance: 0.033
    default = HeadScores(head, {}, Provenance("m"), settings={"snippet_lengths": [10, 30]})
    assert default.chance("forward_induction_varied") == pytest.approx(
        uniform_varied_chance(10, 30)
    )
