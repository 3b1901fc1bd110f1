"""Every function runs on the model's device: load places every parameter and buffer there,
every tensor ihprobe creates is created there (checked statically), tokens on another device are
moved, results come back on the CPU. Without a GPU the ``meta`` device stands in for one (under
:class:`tests.helpers.SameDevice`, which applies CUDA's same-device rule); the tests over
``DEVICES`` run on the CPU everywhere and on cuda where it is present."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from ihprobe.core.standin import id_tokenizer
from ihprobe.io import models
from tests.helpers import SameDevice, save_checkpoint, tiny_hf_model

PACKAGE = Path(__file__).resolve().parents[2] / "ihprobe"
META = torch.device("meta")


@pytest.fixture
def on_meta(monkeypatch):
    """Requests for a device resolve to ``meta``: a device the CPU can stand in for."""
    monkeypatch.setattr(models, "resolve_device", lambda device, *rest: META)


# GPT-2's fused QKV is split at boot by reading its values, which meta tensors have none of
# (TransformerLens refuses); cuda runs it (lab/benchmarks/device_job.py).
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
    hf_tensors = models.LOADED[model].hf_tensors
    assert {t.device for t in hf_tensors.values()} == {META}


# ------------------------------------------------------------------------ tensors ihprobe makes

FACTORIES = {
    "arange",
    "as_tensor",
    "empty",
    "eye",
    "full",
    "linspace",
    "logspace",
    "ones",
    "rand",
    "randint",
    "randn",
    "randperm",
    "tensor",
    "tril_indices",
    "triu_indices",
    "zeros",
}
# where a call may leave the device unsaid, and why (a folder or a module)
ALLOWED = {
    "data/": "producers draw batches on the CPU from seeded generators, the same tokens on every "
    "machine; the trainer moves each batch to the model's device",
}


def factory_calls_without_device(source: str) -> list[tuple[int, str]]:
    """(line, call) of every ``torch.<factory>(...)`` in ``source`` that passes no ``device=``
    (``*_like`` and ``Tensor.new_*`` follow a tensor's device and are not factories here)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
            and node.func.attr in FACTORIES
            and "device" not in {k.arg for k in node.keywords}
        ):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_the_factory_check_finds_a_call_without_a_device():
    source = "import torch\na = torch.zeros(3)\nb = torch.ones(2, device=x)\nc = x.new_zeros(2)\n"
    assert factory_calls_without_device(source) == [(2, "torch.zeros(3)")]


def test_every_tensor_factory_call_in_ihprobe_names_its_device():
    missing = [
        f"{path.relative_to(PACKAGE)}:{line}: {call}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(str(path.relative_to(PACKAGE)).startswith(a) for a in ALLOWED)
        for line, call in factory_calls_without_device(path.read_text())
    ]
    assert not missing, "pass device= (the model's, or 'cpu' for host tables):\n" + "\n".join(
        missing
    )


def test_the_allow_list_names_only_what_exists():
    assert all((PACKAGE / a).exists() for a in ALLOWED)


# ------------------------------------------------------------------------------ device="auto"


def test_auto_on_a_machine_with_a_device_runs_trains_live_probes_there(tmp_path, monkeypatch):
    """``train`` resolves "auto" once (``join_world``) and hands that device to its live probes,
    which load each checkpoint there. With "auto" resolving to the stand-in, the live probe loads
    onto it and runs its first pass there, mixing no devices, until it reads a value (which meta
    has none of). On main the load left the weights on the CPU and the first pass failed as on
    the H200 ("index is on cuda:0, different from other tensors on cpu")."""
    from ihprobe.core import world
    from ihprobe.io.runs import RunDir
    from ihprobe.training.live import LiveProbes
    from ihprobe.training.trainer import TrainConfig, train

    real = world.resolve_device
    run = train(
        TrainConfig(
            out=str(tmp_path / "run"),
            producer="iid",
            steps=4,
            layers=2,
            heads=2,
            d_model=16,
            context=16,
            batch_size=4,
            checkpoints="linear",
            n_checkpoints=1,
            progress=False,
            device="cpu",
        )
    )
    monkeypatch.setattr(world, "resolve_device", lambda d, *r: META if d == "auto" else real(d))
    monkeypatch.setattr(models, "resolve_device", lambda d, *r: torch.device(d))
    with world.join_world("auto") as joined:
        assert joined.device == META
        probes = LiveProbes(
            RunDir(run),
            batch=4,
            tokens_per_update=64,
            device=joined.device,
            on_probe=lambda record: None,
        )
        with SameDevice(), pytest.raises((RuntimeError, NotImplementedError)) as stopped:
            probes(4, None)
    assert "meta" in str(stopped.value) and "same device" not in str(stopped.value)
    assert {p.device for p in probes.model.parameters()} == {META}


@pytest.mark.slow
def test_demo_with_auto_trains_on_the_resolved_device_and_finishes(tmp_path, monkeypatch):
    from dataclasses import replace

    from ihprobe.core import world
    from ihprobe.jobs.demo import DemoConfig, run_demo

    asked, real = [], world.resolve_device
    monkeypatch.setattr(world, "resolve_device", lambda d, *r: asked.append(d) or real(d, *r))
    config = replace(
        DemoConfig(out=str(tmp_path), progress=False), steps=30, n_checkpoints=7, random=2
    )
    result = run_demo(config)
    assert "auto" in asked and result.report.is_file()
