"""The trainer's device settings: precision (fp32, tf32, bf16 autocast) and torch.compile."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ihprobe import checkpoints
from ihprobe.core.errors import IhprobeError
from ihprobe.io.sources import resolve
from ihprobe.io.weights import read_state_dict
from ihprobe.training import precision, trainer
from ihprobe.training.trainer import TrainConfig, train
from tests.helpers import TINY_TRAIN


def tiny(tmp_path, name="run", **overrides) -> TrainConfig:
    """:data:`tests.helpers.TINY_TRAIN` for 10 updates, one checkpoint after step 0."""
    base = {**TINY_TRAIN, "out": str(tmp_path / name), "steps": 10, "n_checkpoints": 1}
    return TrainConfig(**{**base, **overrides})


def final_weights(run) -> dict[str, torch.Tensor]:
    return read_state_dict(resolve(checkpoints(run)[-1].source))


def test_bf16_runs_the_forward_under_autocast_and_keeps_float32_weights(tmp_path, monkeypatch):
    seen, real = [], trainer.causal_lm_loss

    def loss(model, tokens):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return real(model, tokens)

    monkeypatch.setattr(trainer, "causal_lm_loss", loss)
    bf16 = final_weights(train(tiny(tmp_path, "bf16", precision="bf16")))
    assert seen and set(seen) == {(True, torch.bfloat16)}
    seen.clear()
    fp32 = final_weights(train(tiny(tmp_path, "fp32")))
    assert seen and not any(enabled for enabled, _ in seen)
    assert all(w.dtype == torch.float32 and torch.isfinite(w).all() for w in bf16.values())
    assert any(not torch.equal(bf16[k], fp32[k]) for k in fp32)  # bfloat16 rounds the forward


def test_tf32_on_the_cpu_is_float32(tmp_path):
    tf32 = final_weights(train(tiny(tmp_path, "tf32", precision="tf32")))
    fp32 = final_weights(train(tiny(tmp_path, "fp32")))
    assert all(torch.equal(tf32[k], fp32[k]) for k in fp32)


def test_tf32_is_set_for_a_cuda_run_only_and_restored():
    before = torch.backends.cuda.matmul.allow_tf32
    with precision.matmul_precision("tf32", torch.device("cuda")):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with precision.matmul_precision("tf32", torch.device("cpu")):
        assert torch.backends.cuda.matmul.allow_tf32 == before
    assert torch.backends.cuda.matmul.allow_tf32 == before


@pytest.mark.slow
def test_an_unknown_precision_is_one_line(tmp_path):
    with pytest.raises(IhprobeError, match="precision='fp8' is not one of fp32, tf32, bf16"):
        train(tiny(tmp_path, precision="fp8"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ihprobe",
            "train",
            "--out",
            str(tmp_path / "x"),
            "--precision",
            "fp8",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "precision='fp8'" in done.stderr
    assert "Traceback" not in done.stderr


def test_compile_trains_the_same_weights_and_checkpoints_the_plain_model(tmp_path, monkeypatch):
    # inductor needs a minute of C++ compilation on a CPU: aot_eager traces the same graph
    calls, real = [], torch.compile

    def quick(module):
        calls.append(module)
        return real(module, backend="aot_eager")

    monkeypatch.setattr(torch, "compile", quick)
    compiled = final_weights(train(tiny(tmp_path, "compiled", compile=True)))
    monkeypatch.undo()
    plain = final_weights(train(tiny(tmp_path, "plain")))
    assert len(calls) == 1
    assert compiled.keys() == plain.keys()  # no "_orig_mod." in the checkpoint's names
    assert all(torch.allclose(compiled[k], plain[k], atol=1e-5) for k in plain)
