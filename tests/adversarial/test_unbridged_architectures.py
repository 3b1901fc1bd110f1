"""Every causal-LM architecture of transformers that TransformerLens cannot convert ends in one
line naming it (issue 59, item 9): as a HF model object (built on the meta device from its
config class's defaults, one layer where the config allows) and as a checkpoint folder (its
config saved with a tiny weights file), with or without ``architectures`` in ``config.json``.
Before, a folder without ``architectures`` passed the check and a conversion failure inside the
bridge (Falcon's grouped layout) was a traceback."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import transformers
from safetensors.torch import save_file

import ihprobe
from ihprobe.io.sources import _causal_classes, supported_architectures
from tests.helpers import one_line

LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")
UNBRIDGED = sorted(
    {name for name in _causal_classes() if name not in supported_architectures()}
    & set(dir(transformers))
)
MOST = 0.85  # transformers builds at least this share of them from their own defaults


def build(name: str):
    """``name`` on the meta device from its config class's defaults (one layer where that
    builds; a default config that transformers itself cannot build returns None)."""
    cls = getattr(transformers, name)
    for shrink in (True, False):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = cls.config_class()
                config.is_decoder = True  # some decoders of encoder-decoder families ask for it
                for field in LAYERS if shrink else ():
                    layers = getattr(config, field, None)
                    if isinstance(layers, int):
                        setattr(config, field, 1)
                        for key, value in vars(config).items():  # per-layer lists follow
                            if isinstance(value, list) and len(value) == layers:
                                setattr(config, key, value[:1])
                with torch.device("meta"):
                    return cls(config)
        except Exception:  # noqa: BLE001 - transformers' own defaults fail in many ways
            continue
    return None


def test_the_list_covers_the_unbridged_architectures():
    assert len(UNBRIDGED) >= 50  # transformers ships far more causal LMs than the bridge takes
    assert "FalconForCausalLM" not in UNBRIDGED and "BartForCausalLM" in UNBRIDGED


def saved(name: str, folder, listed: bool) -> str | None:
    """``name``'s default config saved in ``folder`` (``architectures`` listed or not) beside a
    tiny weights file; its model type, or None where transformers cannot save its own default."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = getattr(transformers, name).config_class()
            config.is_decoder = True  # else an encoder-decoder family's decoder is refused as such
            config.architectures = [name] if listed else None
            config.save_pretrained(folder)
    except Exception:  # noqa: BLE001 - transformers' own defaults fail in many ways
        return None
    raw = json.loads((folder / "config.json").read_text())
    if not listed:  # some configs write their own class name back
        raw.pop("architectures", None)
        (folder / "config.json").write_text(json.dumps(raw))
    save_file({"x": torch.zeros(1)}, folder / "model.safetensors")
    return config.model_type


@pytest.mark.slow
def test_each_unbridged_architecture_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("IHPROBE_NO_SIZE_LIMITS", "1")  # default configs are large: judged by kind
    built = written = 0
    for name in UNBRIDGED:
        model = build(name)
        if model is not None:
            built += 1
            message = one_line(lambda model=model: ihprobe.scan(model))
            assert f"cannot bridge {name}" in message, message
        for listed in (True, False):
            folder = tmp_path / f"{name}-{listed}"
            model_type = saved(name, folder, listed)
            if model_type is None:
                continue
            written += 1
            message = one_line(lambda folder=folder: ihprobe.load(folder))
            assert f"a {model_type} model" in message, message
            assert not listed or f"cannot bridge {name}" in message, message
    assert built >= MOST * len(UNBRIDGED), f"only {built} of {len(UNBRIDGED)} built"
    assert written >= 2 * MOST * len(UNBRIDGED), f"only {written} of {2 * len(UNBRIDGED)} saved"
