"""Hostile config.json files (issue 19): every bad value, a config that is not a JSON object,
the size limits and their environment variable, and a BERT LM head that is not a decoder are
one line on stderr and exit status 2, checked before any weight is allocated; causality is
measured from the weights, not only read from the config. The checkpoint and the CLI check are
those of ``tests/test_adversarial.py`` (``tests.helpers.cli_refused``)."""

from __future__ import annotations

import pytest
import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.validation.config import SIZE_LIMIT_ENV, check_config
from ihprobe.io.validation.tensors import check_causal
from tests.helpers import cli_refused, edit_config, save_checkpoint, tiny_hf_model

VOCAB = 64


CONFIG_VALUES = {
    "vocab -1": ({"vocab_size": -1}, "vocab_size must be at least 1"),
    "vocab 0": ({"vocab_size": 0}, "vocab_size must be at least 1"),
    "0 heads": ({"num_attention_heads": 0}, "num_attention_heads must be at least 1"),
    "mlp -1": ({"intermediate_size": -1}, "intermediate_size must be at least 0"),
    "3 heads of 32": ({"num_attention_heads": 3}, "not divisible by 3 attention heads"),
    "kv heads": ({"num_key_value_heads": 3}, "not divisible into 3 key/value heads"),
    "layers 'two'": ({"num_hidden_layers": "two"}, "must be an integer (got 'two')"),
    "layers 2.5": ({"num_hidden_layers": 2.5}, "must be an integer (got 2.5)"),
    "layers true": ({"num_hidden_layers": True}, "must be an integer (got True)"),
    "eps NaN": ({"layer_norm_eps": float("nan")}, "'layer_norm_eps' is nan"),
    "eps inf": ({"layer_norm_eps": float("inf")}, "'layer_norm_eps' is inf"),
    "eps -1": ({"layer_norm_eps": -1.0}, "small positive number"),
    "rope NaN": ({"rope_parameters": {"rope_theta": float("nan")}}, "'rope_theta' is nan"),
    "1e9 layers": (
        {"num_hidden_layers": 10**9},
        f"exceeds the limit of 1024; set {SIZE_LIMIT_ENV}",
    ),
    "huge width": ({"hidden_size": 2**17, "intermediate_size": 2**19}, "over the limit"),
    "is_causal false": ({"is_causal": False}, "is_causal is false"),
}


@pytest.mark.parametrize("case", CONFIG_VALUES)
def test_bad_config_values_refused_before_allocation(ckpt, tmp_path, capsys, monkeypatch, case):
    changes, match = CONFIG_VALUES[case]
    edit_config(ckpt, **changes)
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, match)


DEEP = b'{"a": ' * 900 + b"1.5" + b"}" * 900  # parses; checking it must not recurse 900 deep
TOO_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "content, match",
    [
        (b"null", "JSON NoneType"),
        (b"[1, 2]", "JSON list"),
        (b"\x89PNG\x00\xff", "not valid JSON"),
        (b'"text"', "JSON str"),
        (b"{", "not valid JSON"),
        (TOO_DEEP, "not valid JSON"),
        (b'{"vocab_size": 0, "deep": ' + DEEP + b"}", "vocab_size must be at least 1"),
    ],
)
def test_config_that_is_not_an_object_cli_refused(
    ckpt, tmp_path, capsys, monkeypatch, content, match
):
    (ckpt / "config.json").write_bytes(content)
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, match)


def test_size_limits_lift_with_the_environment_variable(monkeypatch):
    config = {"model_type": "gpt_neox", "num_hidden_layers": 2000, "hidden_size": 64}
    with pytest.raises(IhprobeError, match=SIZE_LIMIT_ENV):
        check_config(config, "c")
    assert check_config(config, "c", size_limits=False)["layers"] == 2000
    monkeypatch.setenv(SIZE_LIMIT_ENV, "1")
    assert check_config(config, "c")["layers"] == 2000


def bert_lm(is_decoder: bool):
    from transformers import BertConfig, BertLMHeadModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        is_decoder=is_decoder,
    )
    return BertLMHeadModel(cfg).eval()


def test_bert_lm_head_that_is_not_a_decoder_cli_refused(tmp_path, capsys, monkeypatch):
    ckpt = save_checkpoint(
        bert_lm(is_decoder=False), tmp_path / "work" / "bert", id_tokenizer(VOCAB)
    )
    cli_refused(["info", str(ckpt)], tmp_path, capsys, monkeypatch, "is_decoder=False")


def test_causality_is_measured_not_only_read_from_the_config():
    with pytest.raises(IhprobeError, match="attention sees future tokens"):
        check_causal(bert_lm(is_decoder=False), "bert")
    check_causal(bert_lm(is_decoder=True), "bert")  # the same weights made causal pass
    check_causal(tiny_hf_model("gpt-neox", vocab_size=VOCAB), "neox")
