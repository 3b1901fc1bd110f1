"""Every public function on every available device: cpu always, cuda where present
(``tests.helpers.DEVICES``). Each result comes back on the CPU (frames, CPU tensors), finite,
and, on a device other than the CPU, equal to the CPU's numbers within float tolerance; the
tokens a caller passes on the CPU are moved to the model's device."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.training.trainer import TrainConfig
from tests.helpers import DEVICES, SameDevice, save_checkpoint, tiny_hf_model

ROWS = {"batch": 6}  # rows per probe: a few suffice to compare devices


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint(
        tiny_hf_model("gpt-neox", vocab_size=128), tmp_path_factory.mktemp("c"), id_tokenizer(128)
    )


def tokens(model, seed: int) -> torch.Tensor:
    """Repeated rows on the CPU, whatever the model's device (the functions move them)."""
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(2, model.cfg.d_vocab, (4, 8), generator=g)
    return torch.cat([half, half], dim=1)


FUNCTIONS = {
    "scan": lambda m: ihprobe.scan(m, ["prefix_matching", "ar_accuracy", "induction_loss"], **ROWS),
    "scan_tokens": lambda m: ihprobe.scan(m, ["prefix_matching"], tokens=tokens(m, 0)),
    "ablate": lambda m: ihprobe.ablate(m, top=2, random=2, **ROWS),
    "ablate_resample": lambda m: ihprobe.ablate(m, top=1, random=2, mode="resample", **ROWS),
    "head_effects": lambda m: ihprobe.head_effects(m, ["ar_accuracy", "induction_loss"], **ROWS),
    "composition": lambda m: ihprobe.composition(m, "k", draws=20),
    "patch": lambda m: ihprobe.patch(m, **ROWS),
    "patch_tokens": lambda m: ihprobe.patch(m, clean=tokens(m, 1), corrupted=tokens(m, 2)),
    "path_patch": lambda m: ihprobe.path_patch(m, [(0, 1)], [(1, 0), (1, 2)], **ROWS),
    "attribution_patch": lambda m: ihprobe.attribution_patch(m, **ROWS),
    "loss_by_position": lambda m: ihprobe.loss_by_position(m, text=tokens(m, 3), rows=4),
}


def on_cpu(result) -> list[str]:
    """Names of the tensors in ``result`` (a frame or a result object) that are not on the CPU."""
    if isinstance(result, pd.DataFrame):
        return []
    fields = vars(result) if not dataclasses.is_dataclass(result) else result.__dict__
    found = []
    for name, value in fields.items():
        values = value.items() if isinstance(value, dict) else [(name, value)]
        found += [k for k, v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"]
    return found


def frame(result) -> pd.DataFrame:
    return result if isinstance(result, pd.DataFrame) else result.to_frame()


def numbers(table: pd.DataFrame) -> np.ndarray:
    return table.select_dtypes("number").to_numpy(dtype=float)


@pytest.fixture(scope="module")
def on_the_cpu(checkpoint):
    """Every function's frame on the CPU: the reference the other devices are held to."""
    model = ihprobe.load(checkpoint, device="cpu")
    return {name: frame(run(model)) for name, run in FUNCTIONS.items()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_runs_on_the_device_and_returns_cpu_numbers(
    device, name, checkpoint, on_the_cpu
):
    model = ihprobe.load(checkpoint, device=device)
    assert {p.device.type for p in model.parameters()} == {torch.device(device).type}
    result = FUNCTIONS[name](model)
    assert on_cpu(result) == []
    table = frame(result)
    assert len(table) and table.columns[0] == "model"
    assert numbers(table).shape == numbers(on_the_cpu[name]).shape
    assert np.allclose(
        numbers(table), numbers(on_the_cpu[name]), rtol=1e-3, atol=1e-4, equal_nan=True
    )


NO_VALUES = ("meta tensor", "meta device", "no data")  # what meta says at a first value read


@pytest.mark.parametrize("name", FUNCTIONS)
def test_on_a_stand_in_device_no_function_mixes_devices_before_its_first_value_read(
    name, checkpoint, monkeypatch
):
    """``meta`` stands in for a GPU under CUDA's same-device rule (``SameDevice``): each
    function builds its inputs, masks and hooks and runs its first pass on the model's device,
    until it reads a value, which meta tensors do not have."""
    from ihprobe.io import models

    monkeypatch.setattr(models, "resolve_device", lambda device, *rest: torch.device("meta"))
    with SameDevice():
        model = ihprobe.load(checkpoint, device="cuda")
        try:
            FUNCTIONS[name](model)
        except (RuntimeError, NotImplementedError) as err:
            assert any(words in str(err) for words in NO_VALUES), err


@pytest.mark.parametrize("device", DEVICES)
def test_train_with_live_probes_resumes_and_its_trajectory_scans_on_the_device(device, tmp_path):
    config = dict(
        out=str(tmp_path / "run"),
        producer="iid",
        producer_options={"vocab_size": 64},
        layers=2,
        heads=2,
        d_model=16,
        context=16,
        batch_size=4,
        steps=8,
        schedule="constant",
        checkpoints="linear",
        n_checkpoints=2,
        log_every=2,
        live_probes=True,
        probe_batch=4,
        progress=False,
        device=device,
    )
    run = ihprobe.train(TrainConfig(**config))
    ihprobe.train(TrainConfig(**{**config, "steps": 12, "resume": True}))  # extended: resumed
    probed = [r["step"] for r in ihprobe.io.runs.RunDir(run).records("probes.jsonl")]
    assert probed == [0, 4, 8, 12]
    table = ihprobe.trajectory(run, ["prefix_matching"], device=device, cache=False, progress=False)
    assert sorted(table["step"].unique()) == [0, 4, 8, 12]
    assert np.isfinite(table["value"]).all()


BF16 = {"rtol": 0.05, "atol": 0.02}  # bfloat16 keeps 8 bits of mantissa; scores sum in float32
# losses and attention: an accuracy or rank of a random model flips on near-tied logits
SMOOTH = {
    "scan": lambda m: ihprobe.scan(m, ["prefix_matching", "induction_loss"], **ROWS),
    # per layer, top 2 of 2 heads: every head, so no near-tied ranking picks another set
    "ablate": lambda m: ihprobe.ablate(
        m, top=2, scope="layer", draws=2, metrics=["induction_loss"], **ROWS
    ),
    "head_effects": lambda m: ihprobe.head_effects(m, ["induction_loss"], **ROWS),
}
MEASURED = ["value", "clean", "ablated", "change"]  # not ratios of near-zero changes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMOOTH)
def test_scan_ablate_and_head_effects_run_in_bfloat16_within_its_tolerance(
    device, name, checkpoint
):
    runs = {
        dtype: frame(SMOOTH[name](ihprobe.load(checkpoint, device=device, dtype=dtype)))
        for dtype in ("float32", "bfloat16")
    }
    columns = [c for c in MEASURED if c in runs["float32"]]
    fp32, bf16 = (runs[d][columns].to_numpy(dtype=float) for d in ("float32", "bfloat16"))
    assert np.isfinite(fp32).any() and np.allclose(bf16, fp32, equal_nan=True, **BF16)


def test_rows_per_pass_shrink_to_the_memory_there_is(checkpoint, monkeypatch):
    from ihprobe.probes import engine

    model = ihprobe.load(checkpoint)
    probe = engine.Probe("p", torch.zeros(100, 21, dtype=torch.long))  # unembeds all 21
    one_row = 4 * engine.LOGIT_SHARE * 21 * model.cfg.d_vocab  # bytes that allow one row
    monkeypatch.setattr(engine, "available_bytes", lambda device: 3 * one_row)
    assert engine.budget_rows(model, probe) == 3
    monkeypatch.setattr(engine, "available_bytes", lambda device: 10**15)
    assert engine.budget_rows(model, probe) == engine.MAX_TOKENS["cpu"] // 21  # tokens bound
