"""The device job's ``offload`` step in its CPU mode (issue 62): a tiny 12-layer model split
across the CPU and the disk by ``device_map="auto"``; scan and ablate equal the model in one
place, and the job's results table records both timings."""

from __future__ import annotations

import pytest

from lab.tests.device_steps import run_step


@pytest.mark.slow
def test_the_offload_step_splits_a_model_over_the_cpu_and_disk_and_agrees(tmp_path):
    text = run_step("offload", tmp_path)
    rows = [line for line in text.splitlines() if "the CPU and the disk" in line]
    assert len(rows) == 2, text  # scan and ablate
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[-1]) <= 1e-5, row  # the largest difference from one device


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from lab.benchmarks import device_offload

    folder = tmp_path_factory.mktemp("offload-step")
    return folder, device_offload.build(folder / "model", "cpu", "tiny")


@pytest.mark.slow
def test_the_one_gpu_split_names_a_device_for_every_parameter(saved, monkeypatch):
    """The map of the GPU-and-CPU split (run only on a GPU) covers the whole model, the
    embedding and the first half of the layers on the CPU, the rest on GPU 0."""
    import accelerate
    from accelerate.utils import check_device_map

    from lab.benchmarks import device_offload

    maps = []

    def dispatch(hf, device_map, main_device):  # accelerate cannot dispatch to GPU 0 here
        check_device_map(hf, device_map)  # raises for a parameter the map leaves out
        maps.append((device_map, main_device))
        raise RuntimeError("dispatched")

    monkeypatch.setattr(accelerate, "dispatch_model", dispatch)
    with pytest.raises(RuntimeError, match="dispatched"):
        device_offload.split(saved[0] / "model")
    ((places, main),) = maps
    layers = [places[f"gpt_neox.layers.{i}"] for i in range(12)]
    assert main == "cpu" and layers == ["cpu"] * 6 + [0] * 6
    assert places["gpt_neox.embed_in"] == "cpu" and list(places.values())[-1] == 0


@pytest.mark.slow
def test_a_refused_placement_is_a_row_and_the_lifted_rule_lets_it_run(saved, monkeypatch):
    """What the step does on one GPU, on the CPU and the disk: TransformerLens's rule against
    mixed maps, made to hold here, is ihprobe's one line in the row's note; lifted, the same
    placement runs and equals the model in memory."""
    from transformer_lens.utilities import multi_gpu

    import ihprobe
    from lab.benchmarks import device_offload

    folder, size = saved
    monkeypatch.setattr(multi_gpu, "is_mixed_offload_gpu", lambda places: True)
    spans, load = device_offload.placements("cpu", size, folder)[0]
    calls = {"scan": lambda m: ihprobe.scan(m, ["prefix_matching"], batch=2).to_frame()}
    reference = {"scan": device_offload.timed(calls["scan"], ihprobe.load(folder / "model"))}
    (refused,) = device_offload.measured(spans, load, calls, reference, 0.7, True)
    assert "TransformerLens's bridge does not take" in refused["note"]
    assert refused["max difference"] is None
    lifted = lambda: device_offload.with_lifted(load)  # noqa: E731
    (ran,) = device_offload.measured(spans, lifted, calls, reference, 0.7, True)
    assert ran["note"] is None and ran["max difference"] <= 1e-5
