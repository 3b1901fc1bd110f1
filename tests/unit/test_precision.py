"""Loading in bfloat16 / float16 and on a named device; probe scores accumulate in float32."""

from __future__ import annotations

import warnings

import pytest
import torch

import ihprobe
from ihprobe.core.errors import IhprobeError
from tests.helpers import save_checkpoint, tiny_hf_model

# bfloat16 keeps 8 significant bits: each activation is off by up to 2**-8 relative, and the
# error grows a few-fold over 2 layers. Attention scores lie in [0, 1] and are means over rows,
# so 0.02 absolute is ~5 bf16 steps at the largest value; losses (~log 512 = 6.2) get 2%.
ATTENTION_ATOL = 0.02
LOSS_RTOL = 0.02
METRICS = ["prefix_matching", "previous_token", "induction_loss", "ar_mean_rank"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer):
    return save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path_factory.mktemp("neox"), tokenizer)


def scores(checkpoint, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ihprobe.load(checkpoint, dtype=dtype)
    assert next(model.parameters()).dtype == getattr(torch, dtype)
    return ihprobe.scan(model, METRICS, n=20, batch=20, seed=3)


def test_bfloat16_scores_match_float32_within_bf16_precision(checkpoint):
    full, half = scores(checkpoint, "float32"), scores(checkpoint, "bfloat16")
    for metric in ("prefix_matching", "previous_token"):
        assert half.head[metric].dtype == torch.float32  # accumulated in float32
        torch.testing.assert_close(
            half.head[metric], full.head[metric], atol=ATTENTION_ATOL, rtol=0
        )
    assert half.model["induction_loss"] == pytest.approx(
        full.model["induction_loss"], rel=LOSS_RTOL
    )
    # the comparison can fail: a different model's scores are far outside the tolerance
    assert (full.head["prefix_matching"] - half.head["prefix_matching"]).abs().max() > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dtype": "float8"}, "dtype='float8' is not one of float32, bfloat16, float16"),
        ({"device": "tpu"}, "device='tpu' is not a device; use auto, cpu, cuda or cuda:N"),
    ],
)
def test_bad_dtype_or_device_is_one_line(checkpoint, kwargs, message):
    with pytest.raises(IhprobeError, match=message.replace("(", r"\(")):
        ihprobe.load(checkpoint, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where there is no GPU")
def test_cuda_without_a_gpu_says_what_to_do(checkpoint):
    with pytest.raises(IhprobeError, match="no CUDA device is available; use cpu"):
        ihprobe.load(checkpoint, device="cuda")
