"""The package surface: every public name resolves, and no submodule import shadows one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

import ihprobe
from ihprobe.core.errors import IhprobeError


def test_public_names_survive_importing_every_submodule():
    for info in pkgutil.walk_packages(ihprobe.__path__, "ihprobe."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)
    for name in ihprobe.__all__:
        value = getattr(ihprobe, name)
        assert not inspect.ismodule(value), f"ihprobe.{name} is shadowed by a submodule"


def test_cli_lists_every_command():
    out = subprocess.run(
        [sys.executable, "-m", "ihprobe", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in (
        "demo",
        "info",
        "scan",
        "train",
        "data-stats",
        "predict",
        "emergence",
        "fit-law",
        "sweep",
        "ablate",
    ):
        assert command in out


def test_wrong_types_in_the_public_api_are_one_line_ihprobe_errors():
    """Calls a new user gets wrong: each raises IhprobeError with one line, not a TypeError."""
    from ihprobe.probes.scores import HeadScores

    tiny_model = SimpleNamespace(cfg=SimpleNamespace(n_layers=2, n_heads=4))
    scores = HeadScores.from_frame(
        pd.DataFrame(
            {
                "model": "m",
                "revision": None,
                "step": 0,
                "tokens": 0,
                "layer": [0, 0],
                "head": [0, 1],
                "metric": "prefix_matching",
                "value": [0.1, 0.9],
            }
        )
    )
    calls = {
        "top_heads": lambda: scores.top_heads("prefix_matching", k="3"),
        "predict_emergence": lambda: ihprobe.predict_emergence("16", 64),
        "ablate_heads": lambda: ihprobe.ablate_heads(tiny_model, (1, 2)).__enter__(),
        "emergence": lambda: ihprobe.emergence("run_dir"),
    }
    for name, call in calls.items():
        with pytest.raises(IhprobeError) as caught:
            call()
        assert "\n" not in str(caught.value), name
    assert scores.top_heads("prefix_matching", k=1)[0][:2] == (0, 1)  # right types still work


def test_the_probe_inputs_are_public_and_check_their_arguments(tmp_path):
    """``repeated_tokens``, ``token_rows`` and ``token_losses``, public for measures of one's
    own: seeded rows, cut as given, one loss per predicted token; bad arguments one line."""
    from ihprobe.core.standin import id_tokenizer
    from tests.helpers import save_checkpoint, tiny_hf_model

    path = save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "tiny", id_tokenizer(512))
    model = ihprobe.load(path)
    tokens = ihprobe.repeated_tokens(model, n=6, batch=3, seed=2)
    assert torch.equal(tokens, ihprobe.repeated_tokens(model, n=6, batch=3, seed=2))
    assert not torch.equal(tokens, ihprobe.repeated_tokens(model, n=6, batch=3, seed=3))
    assert tokens.shape == (3, 12) and torch.equal(tokens[:, :6], tokens[:, 6:])
    rows = ihprobe.token_rows(model, tokens, rows=2, length=8)
    assert torch.equal(rows, tokens[:2, :8])
    logits = model(rows)
    by_torch = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), rows[:, 1:], reduction="none"
    )
    assert torch.allclose(ihprobe.token_losses(logits, rows), by_torch, atol=1e-5)
    for call in (
        lambda: ihprobe.repeated_tokens(model, batch=0),
        lambda: ihprobe.repeated_tokens(model, seed=-1),
        lambda: ihprobe.token_rows(model, tokens, rows=2, length=1.5),
    ):
        with pytest.raises(IhprobeError) as caught:
            call()
        assert "\n" not in str(caught.value)
