"""Head heatmaps: colour ranges come from the metric (not the data), zmin/zmax override them,
and a run's checkpoints get one slider on one shared range."""

from __future__ import annotations

import torch

from ihprobe.figures.heads import checkpoint_slider, head_heatmap, layer_head_heatmap
from ihprobe.io.provenance import Provenance
from ihprobe.probes.scores import HeadScores


def scores(values, step=0) -> HeadScores:
    values = torch.tensor(values)
    head = {"prefix_matching": values, "copying": -values}
    return HeadScores(head=head, model={}, provenance=Provenance("m", None, step, step * 100))


def test_bounded_scores_keep_0_to_1_so_chance_stays_dark():
    trace = head_heatmap(scores([[0.02, 0.03]]), "prefix_matching").data[0]
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)  # auto-scaling would stretch 0.02..0.03


def test_signed_scores_are_diverging_around_0():
    trace = head_heatmap(scores([[0.2, 0.5]]), "copying").data[0]
    assert trace.zmid == 0.0 and trace.zmin is None and trace.zmax is None
    assert trace.colorscale[0][1] != trace.colorscale[-1][1]  # two different ends (RdBu)


def test_zmin_zmax_override():
    trace = layer_head_heatmap(torch.rand(2, 3), "copying", "t", zmin=-2.0, zmax=3.0).data[0]
    assert (trace.zmin, trace.zmax) == (-2.0, 3.0) and trace.zmid is None


def test_checkpoint_slider_has_a_frame_per_checkpoint_on_one_range():
    series = [scores([[0.02, 0.03]], step=0), scores([[0.05, 0.9]], step=100)]
    fig = checkpoint_slider(series)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["step 0", "step 100"] and fig.layout.sliders[0].active == 1
    assert steps[0].args[0]["z"][0].round(3).tolist() == [[0.02, 0.03]]  # each step's own values
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)  # one range for every step
    assert fig.data[0].z.round(3).tolist() == [[0.05, 0.9]]  # the last checkpoint first
