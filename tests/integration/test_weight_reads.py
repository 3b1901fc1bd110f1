"""Weight-only metrics read only the tensors they use: counted at ``safe_open``, the numbers
equal to the loaded model's, over a run with and without prefetching, and nothing read again
once the rows and digests are cached."""

from __future__ import annotations

import pandas as pd
import pytest
import safetensors.torch
import torch

import ihprobe.io.tensor_reads
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.weight_series import weight_trajectory
from ihprobe.io.head_weights import WEIGHTS, HeadWeights
from ihprobe.io.models import load
from ihprobe.io.runs import checkpoints
from ihprobe.probes.composition import composition
from ihprobe.probes.copying import copying_scores
from tests.helpers import fake_run


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """Every tensor read through ``safe_open`` (by name); reading a whole file fails."""
    names: list[str] = []
    real = ihprobe.io.tensor_reads.safe_open

    class Counting:
        def __init__(self, *args, **kwargs):
            self.handle = real(*args, **kwargs)

        def get_tensor(self, name):
            names.append(name)
            return self.handle.get_tensor(name)

        def get_slice(self, name):
            names.append(name)
            return self.handle.get_slice(name)

    def whole_file(*args, **kwargs):
        raise AssertionError("a whole safetensors file was read")

    monkeypatch.setattr(ihprobe.io.tensor_reads, "safe_open", Counting)
    monkeypatch.setattr(safetensors.torch, "load_file", whole_file)
    return names


def test_head_weights_equal_the_loaded_models(tiny_checkpoint):
    arch, directory = tiny_checkpoint
    model, weights = load(directory), HeadWeights(directory)
    for name in WEIGHTS:
        assert torch.equal(getattr(model, name).detach(), getattr(weights, name)), (arch, name)
    assert torch.equal(copying_scores(model), copying_scores(HeadWeights(directory)))
    for kind in ("q", "k", "v"):
        expected = composition(model, kind, draws=4).raw
        found = composition(HeadWeights(directory), kind, draws=4).raw
        torch.testing.assert_close(found, expected, equal_nan=True)


def test_copying_reads_embeddings_and_attention_only(tiny_checkpoint, counted):
    arch, directory = tiny_checkpoint
    weights = HeadWeights(directory)
    copying_scores(weights)
    expected = {n for w in ("W_E", "W_U", "W_V", "W_O") for n in weights.names(w)}
    assert set(counted) == expected and len(counted) == len(expected)  # each read once
    assert not any("mlp" in n or "norm" in n or "ln_" in n or "bias" in n for n in counted)
    assert len(counted) < len(weights.reader.names) / 2


def test_composition_reads_attention_weights_only(tiny_checkpoint, counted):
    arch, directory = tiny_checkpoint
    weights = HeadWeights(directory)
    composition(weights, "k", draws=4)
    layers = weights.cfg.n_layers
    assert {n for n in counted} == {
        n for w in ("W_Q", "W_K", "W_V", "W_O") for n in weights.names(w)
    }
    assert not any("embed" in n or "wte" in n or "lm_head" in n for n in counted)
    assert len(set(counted)) in (2 * layers, 4 * layers)  # fused QKV + out, or q, k, v, o


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return fake_run(tmp_path_factory.mktemp("weights") / "run", [0, 10, 20])


def test_weight_trajectory_equals_the_loaded_models_scores(run, tmp_path):
    table = weight_trajectory(run, ["copying", "k_composition_max"], cache=False, draws=4)
    plain = weight_trajectory(
        run, ["copying", "k_composition_max"], cache=False, prefetch=0, draws=4
    )
    pd.testing.assert_frame_equal(table, plain)
    for ckpt in checkpoints(run):
        model = load(ckpt.source)
        got = table.query(f"step == {ckpt.step} and metric == 'copying'")
        expected = copying_scores(model).flatten().tolist()
        assert got["value"].tolist() == pytest.approx(expected, abs=0)
    assert table["duplicate_of"].isna().all()
    assert table.query("metric == 'k_composition_max' and layer == 0")["value"].isna().all()


def test_a_second_run_reads_nothing(run, tmp_path, counted):
    first = weight_trajectory(run, ["copying"], cache=tmp_path / "c")
    assert counted  # the first run read the tensors copying uses
    counted.clear()
    again = weight_trajectory(run, ["copying"], cache=tmp_path / "c")
    assert counted == []
    pd.testing.assert_frame_equal(first, again)


def test_unknown_metric_is_one_line(run):
    with pytest.raises(IhprobeError, match="prefix_matching is not a weight-only metric"):
        weight_trajectory(run, ["prefix_matching"])


def test_a_bad_config_or_a_nan_tensor_is_one_line(run, tmp_path):
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    source = checkpoints(run)[0].source
    broken = tmp_path / "broken"
    shutil.copytree(source, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "num_attention_heads": 0}))
    with pytest.raises(IhprobeError):
        weight_trajectory(broken, ["copying"], cache=False)
    (broken / "config.json").write_text(json.dumps(config))
    state = load_file(str(broken / "model.safetensors"))
    name = next(n for n in state if n.endswith("attention.dense.weight"))
    state[name][0, 0] = float("nan")
    save_file(state, str(broken / "model.safetensors"))
    with pytest.raises(IhprobeError, match=f"tensor {name} has 1 NaN"):
        weight_trajectory(broken, ["copying"], cache=False)


def test_the_weight_trajectory_command_reads_a_local_run(run, tmp_path, capsys):
    """A run folder has no revision (NaN in the table): the command still names its last
    checkpoint and that checkpoint's top heads, and writes the same rows as the function."""
    from ihprobe.cli import main

    code = main(["weight-trajectory", str(run), "--metrics", "copying", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[0].endswith("step 20") and "top copying: L" in out, out
    written = pd.read_csv(tmp_path / "weights.csv")
    assert len(written) == len(weight_trajectory(run, ["copying"], cache=False))
