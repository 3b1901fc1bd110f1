"""Every function runs on the model's device: load places every parameter and buffer there,
every tensor ihprobe creates is created there (checked statically), tokens on another device are
moved, results come back on the CPU. Without a GPU the ``meta`` device stands in for one (under
:class:`tests.helpers.SameDevice`, which applies CUDA's same-device rule); the tests over
``DEVICES`` run on the CPU everywhere and on cuda where it is present."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ihprobe.core.standin import id_tokenizer
from ihprobe.io import models
from tests.helpers import SameDevice, save_checkpoint, tiny_hf_model

PACKAGE = Path(__file__).resolve().parents[1] / "ihprobe"
META = torch.device("meta")


@pytest.fixture
def on_meta(monkeypatch):
    """Requests for a device resolve to ``meta``: a device the CPU can stand in for."""
    monkeypatch.setattr(models, "resolve_device", lambda device, *rest: META)


# GPT-2's fused QKV is split at boot by reading its values, which meta tensors have none of
# (TransformerLens refuses); cuda runs it (benchmarks/device_job.py).
@pytest.mark.parametrize("arch", ["gpt-neox", "llama"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_load_puts_every_parameter_and_buffer_on_the_requested_device(
    arch, dtype, tmp_path, on_meta
):
    save_checkpoint(tiny_hf_model(arch), tmp_path, id_tokenizer(512))
    with SameDevice():  # the forward check mixes no devices
        model = models.load(tmp_path, device="cuda", dtype=dtype)
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    assert tensors and {t.device for t in tensors.values()} == {META}
    assert {p.dtype for p in model.parameters()} == {models.parse_dtype(dtype)}
    assert torch.device(model.cfg.device) == META
    # load_weights copies into the tensors the model runs with, not left-behind CPU copies
    hf_tensors = models._LOADED[model].hf_tensors
    assert {t.device for t in hf_tensors.values()} == {META}
