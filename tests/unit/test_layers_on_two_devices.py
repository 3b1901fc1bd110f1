"""Per-layer results of a model split over two devices (issue 62): a device map hands back each
layer's activations where that layer runs, so everything stacked across layers is gathered on
one device first. ``meta`` stands in for a second device: under ``SameDevice`` (CUDA's rule on
any device) an op over CPU and meta tensors raises, as one over two GPUs would."""

from __future__ import annotations

import pytest
import torch

from ihprobe.core.devices import gathered, stack_layers
from ihprobe.probes.repeated import _pattern_scores
from tests.helpers import SameDevice


def split(shape=(2, 3)) -> list[torch.Tensor]:
    """Layer 0 on the stand-in device, layer 1 on the CPU."""
    return [torch.ones(shape, device="meta"), torch.arange(6.0).view(shape)]


def test_a_plain_stack_of_two_devices_raises_under_the_same_device_rule():
    with SameDevice(), pytest.raises(RuntimeError, match="same device"):
        torch.stack(split())  # what a split model's layers meet without the gathering


def test_layers_on_two_devices_are_stacked_on_the_first_layers():
    with SameDevice():
        found = stack_layers(split())
        along = stack_layers(split(), dim=1)
    assert found.device.type == "meta" and found.shape == (2, 2, 3)
    assert along.device.type == "meta" and along.shape == (2, 2, 3)


def test_a_named_device_takes_them_all_and_one_already_there_is_not_copied():
    on_cpu = torch.arange(3.0)
    assert [t.device.type for t in gathered([on_cpu, on_cpu.clone()], "meta")] == ["meta"] * 2
    kept = gathered([on_cpu, torch.zeros(3)])
    assert kept[0] is on_cpu and torch.equal(kept[1], torch.zeros(3))
    assert stack_layers([on_cpu, on_cpu + 1]).tolist() == [[0, 1, 2], [1, 2, 3]]
    assert gathered([]) == []


def test_scans_pattern_scores_take_layers_kept_on_two_devices():
    """The scan's stacking of the kept attention pairs, layer 0 on one device, layer 1 on the
    other: no op mixes them, and the scores are those of the same pairs on the CPU."""
    pairs = [torch.rand(4, 2, 5, generator=torch.Generator().manual_seed(i)) for i in (0, 1)]
    kept = {("pattern", 0): pairs[0].to("meta"), ("pattern", 1): pairs[1]}
    args = ({"prefix_matching": None}, {"prefix_matching": slice(None)}, ["prefix_matching"], 2)
    with SameDevice():
        head, per_pair = _pattern_scores(kept, *args)
    assert head["prefix_matching"].device.type == "meta"
    assert per_pair["prefix_matching"].shape == (2, 4, 2, 5)
    on_cpu, _ = _pattern_scores({("pattern", i): p for i, p in enumerate(pairs)}, *args)
    assert torch.allclose(on_cpu["prefix_matching"][1], pairs[1].mean(dim=(0, 2)))
