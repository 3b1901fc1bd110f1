"""Fuzzed input (issue 19): ``hypothesis`` draws config schemas, safetensors headers and odd
config values; each must give an ``IhprobeError`` with one line or pass, never another exception
(the hand-written hostile cases: `tests/test_adversarial.py`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError
from ihprobe.io.validation.config import check_config
from ihprobe.io.validation.files import safetensors_header
from tests.helpers import edit_config, raw_safetensors

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
SHAPE_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "layer_norm_eps",
    "is_decoder",
    "is_causal",
    "head_dim",
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(SHAPE_KEYS), ANY_JSON, max_size=5),
    st.sampled_from(["gpt_neox", "llama", "bert"]),
)
def test_fuzzed_configs_pass_or_raise_ihprobe_error(values, model_type):
    config = {"model_type": model_type, "architectures": ["XForCausalLM"], **values}
    try:
        found = check_config(config, "c")
    except IhprobeError as err:
        assert "\n" not in str(err)
        return
    assert all(isinstance(v, int) and v >= 1 for v in found.values())
    if "num_attention_heads" in found and "hidden_size" in found and "head_dim" not in config:
        assert found["hidden_size"] % found["num_attention_heads"] == 0


ENTRY = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "F16", "I8", "BOOL", "Q4"]) | ANY_JSON,
        "shape": st.lists(st.integers(-2, 5), max_size=3) | ANY_JSON,
        "data_offsets": st.lists(st.integers(-8, 64), min_size=2, max_size=2) | ANY_JSON,
    }
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(st.text(max_size=3), ENTRY | ANY_JSON, max_size=3) | ANY_JSON,
    st.integers(0, 64),
)
def test_fuzzed_safetensors_headers_pass_or_raise_ihprobe_error(tmp_path, header, data_bytes):
    file = tmp_path / "fuzz.safetensors"
    raw_safetensors(file, header, b"\0" * data_bytes)
    try:
        entries = safetensors_header(file)
    except IhprobeError as err:
        assert "\n" not in str(err)
        return
    spans = sorted(e["data_offsets"] for e in entries.values())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # no overlap


CONFIG_KEYS = (
    "hidden_act",
    "hidden_dropout",
    "rope_parameters",
    "architectures",
    "model_type",
    "dtype",
    "use_parallel_residual",
    "tie_word_embeddings",
    "is_decoder",
    "max_position_embeddings",
    "intermediate_size",
    "partial_rotary_factor",
)
ODD_VALUES = st.sampled_from([None, True, 0, -1, 3, 2.5, 1e-30, "x", "gelu", [], {}, [1], {"a": 1}])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), ODD_VALUES, min_size=1, max_size=2))
def test_fuzzed_config_values_through_info(base, tmp_path_factory, capsys, changes):
    """Values the schema does not know still give exit 0 or one line with exit 2 from HF."""
    ckpt = Path(shutil.copytree(base, tmp_path_factory.mktemp("fuzz") / "ckpt"))
    edit_config(ckpt, **changes)
    capsys.readouterr()
    code = main(["info", str(ckpt)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    assert code == 0 or len(err.strip().splitlines()) == 1, err
