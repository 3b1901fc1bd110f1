"""ihprobe.load and the checkpoint helpers: every architecture, every bad input, no code run."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, BertConfig, BertModel

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.io import models, swap, weights
from ihprobe.io.validation.tensors import check_finite_files
from tests.helpers import save_checkpoint, tiny_hf_model


def _hf_logits(directory, tokens):
    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        return hf(tokens).logits


def test_load_matches_hf_logits(tiny_checkpoint):
    arch, directory = tiny_checkpoint
    model = ihprobe.load(directory)
    tokens = torch.randint(2, 512, (3, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(tokens)
    assert (ours - _hf_logits(directory, tokens)).abs().max() <= 1e-4
    assert model.cfg.n_layers == 2 and model.cfg.n_heads == 4
    assert models.provenance(model).model == str(directory)
    if arch == "llama":
        assert model.cfg.n_key_value_heads == 2  # grouped KV heads survive the bridge


def test_processing_tl_shifts_logits_but_keeps_log_probs(tiny_checkpoint):
    _, directory = tiny_checkpoint
    tokens = torch.randint(2, 512, (2, 24), generator=torch.Generator().manual_seed(2))
    processed = ihprobe.load(directory, processing="tl")
    with torch.no_grad():
        ours = processed(tokens)
    ref = _hf_logits(directory, tokens)
    assert torch.allclose(ours.log_softmax(-1), ref.log_softmax(-1), atol=1e-4)
    # the difference is one constant per position
    shift = ours - ref
    assert (shift - shift[..., :1]).abs().max() <= 1e-4


def test_processing_unknown_is_an_error(tiny_checkpoint):
    with pytest.raises(IhprobeError, match="processing"):
        ihprobe.load(tiny_checkpoint[1], processing="fold")


def test_missing_tokenizer_warns_and_works_on_ids(tmp_path):
    directory = save_checkpoint(tiny_hf_model("gpt-neox", vocab_size=97), tmp_path / "bare")
    with pytest.warns(UserWarning, match="no tokenizer"):
        model = ihprobe.load(directory)
    assert model.tokenizer.decode([5, 7]) == "<5> <7>"
    tokens = torch.randint(0, 97, (2, 10))
    with torch.no_grad():
        assert torch.allclose(model(tokens), _hf_logits(directory, tokens), atol=1e-4)


def test_the_command_line_says_a_missing_tokenizer_in_one_line(tmp_path, capsys):
    from ihprobe.cli import main

    directory = save_checkpoint(tiny_hf_model("gpt-neox", vocab_size=97), tmp_path / "bare")
    argv = ["scan", str(directory), "--metrics", "prefix_matching", "--n", "8", "--batch", "2"]
    assert main([*argv, "--out", str(tmp_path / "scan")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "tokenizer" in line]
    assert said == [
        f"WARNING {directory} has no tokenizer files; the model works on token ids and a "
        "stand-in tokenizer maps id i to '<i>'. Load it with ihprobe.load(path, tokenizer=...) "
        "to use a real one."
    ]


def test_missing_tokenizer_can_be_passed(tmp_path, tokenizer):
    directory = save_checkpoint(tiny_hf_model("gpt2"), tmp_path / "bare")
    model = ihprobe.load(directory, tokenizer=tokenizer)
    assert model.tokenizer.decode(tokenizer("copy me").input_ids) == "copy me"


def test_bad_paths_say_what_was_looked_for(tmp_path):
    with pytest.raises(IhprobeError, match="does not exist"):
        ihprobe.load(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(IhprobeError, match="no config.json"):
        ihprobe.load(empty)
    with pytest.raises(IhprobeError, match="is a file"):
        ihprobe.load(__file__)


def test_non_causal_config_names_supported_architectures(tmp_path):
    bert = BertModel(
        BertConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    save_checkpoint(bert, tmp_path / "bert")
    with pytest.raises(IhprobeError, match="not a causal language model.*GPTNeoXForCausalLM"):
        ihprobe.load(tmp_path / "bert")


def test_truncated_and_corrupt_safetensors_name_the_file(tmp_path, tiny_checkpoint):
    _, source = tiny_checkpoint
    for damage in ("truncate", "garble"):
        directory = tmp_path / damage
        shutil.copytree(source, directory)
        weights = directory / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\xff" * 64)
        with pytest.raises(IhprobeError, match="model.safetensors is corrupt or truncated"):
            ihprobe.load(directory)


class _Payload:
    """Unpickling this object creates a file: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    directory = save_checkpoint(tiny_hf_model("gpt2"), tmp_path / "evil")
    (directory / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    with open(directory / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"weight": _Payload(str(marker))}, fh)
    with pytest.raises(IhprobeError, match="refused to load .*pytorch_model.bin"):
        ihprobe.load(directory)
    assert not marker.exists()


def test_plain_bin_checkpoint_loads_through_weights_only(tmp_path):
    hf = tiny_hf_model("gpt-neox")
    directory = tmp_path / "bin"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    torch.save(hf.state_dict(), directory / "pytorch_model.bin")
    with pytest.warns(UserWarning, match="no tokenizer"):
        model = ihprobe.load(directory)
    tokens = torch.randint(0, 512, (2, 12))
    with torch.no_grad():
        assert torch.allclose(model(tokens), hf(tokens).logits, atol=1e-4)


def test_hub_id_offline_fails_at_once():
    import time

    start = time.monotonic()
    with pytest.raises(IhprobeError, match="not in the local HF cache"):
        ihprobe.load("EleutherAI/pythia-70m", revision="step1000")
    assert time.monotonic() - start < 10


def test_hash_nan_and_identical_checkpoints(tmp_path):
    hf = tiny_hf_model("gpt-neox")
    a = save_checkpoint(hf, tmp_path / "a")
    b = save_checkpoint(hf, tmp_path / "b")
    c = save_checkpoint(tiny_hf_model("gpt-neox", seed=1), tmp_path / "c")
    assert weights.weights_hash(a) == weights.weights_hash(b) != weights.weights_hash(c)
    assert weights.identical_checkpoints([a, c, b]) == [(str(a), str(b))]
    with torch.no_grad():
        hf.gpt_neox.layers[1].mlp.dense_h_to_4h.weight[0, 0] = float("nan")
    bad = save_checkpoint(hf, tmp_path / "bad")
    with pytest.raises(IhprobeError, match="layers.1.mlp.dense_h_to_4h.weight has 1 NaN"):
        check_finite_files(weights.weight_files(bad))
    check_finite_files(weights.weight_files(a))  # finite weights pass


def _fake_run(root, steps):
    for i, step in enumerate(steps):
        d = save_checkpoint(
            tiny_hf_model("gpt-neox", seed=i), root / "checkpoints" / f"step-{step:06d}"
        )
        (d / "ihprobe.json").write_text(json.dumps({"step": step, "tokens": step * 2048}))
    (root / "run.json").write_text("{}")
    return root


def test_checkpoints_of_a_run_in_training_order(tmp_path):
    run = _fake_run(tmp_path / "run", [100, 0, 20])
    found = ihprobe.checkpoints(run)
    assert [c.step for c in found] == [0, 20, 100]
    assert [c.tokens for c in found] == [0, 40960, 204800]
    with pytest.raises(IhprobeError, match="run directory: pass one of its checkpoints"):
        ihprobe.load(run)


def test_load_weights_reuses_one_skeleton(tmp_path):
    run = _fake_run(tmp_path / "run", [0, 10])
    first, second = ihprobe.checkpoints(run)
    model = ihprobe.load(first.source)
    swap.load_weights(model, second.source)
    tokens = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        assert torch.allclose(model(tokens), _hf_logits(second.source, tokens), atol=1e-4)
    assert models.provenance(model).step == 10


def test_hub_revisions_are_ordered_by_step():
    found = ihprobe.checkpoints("EleutherAI/pythia-70m", revisions=["step2000", "step0", "step512"])
    assert [c.revision for c in found] == ["step0", "step512", "step2000"]
    assert [c.step for c in found] == [0, 512, 2000]


def test_network_is_blocked_in_tests():
    import socket

    from tests.helpers import NetworkBlocked

    with pytest.raises(NetworkBlocked):
        socket.create_connection(("198.51.100.1", 443), timeout=1)


@pytest.mark.slow  # a fresh Python process imports torch and transformers: seconds
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "ihprobe", "info", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "does not exist" in result.stderr


@pytest.mark.slow  # a fresh Python process per architecture
def test_cli_info_describes_a_checkpoint(tiny_checkpoint):
    arch, directory = tiny_checkpoint
    result = subprocess.run(
        [sys.executable, "-m", "ihprobe", "info", str(directory), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(result.stdout)
    assert info["n_layers"] == 2 and info["d_vocab"] == 512
    assert info["n_key_value_heads"] == (2 if arch == "llama" else 4)


def test_load_or_swap_reuses_a_skeleton_and_reloads_another_architecture(tmp_path):
    run = _fake_run(tmp_path / "run", [0, 10])
    first, second = ihprobe.checkpoints(run)
    model = swap.load_or_swap(None, first.source)
    swapped = swap.load_or_swap(model, second.source)
    assert swapped is model
    tokens = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        assert torch.allclose(swapped(tokens), _hf_logits(second.source, tokens), atol=1e-4)
    other = save_checkpoint(tiny_hf_model("llama"), tmp_path / "llama")
    fresh = swap.load_or_swap(model, other)
    assert fresh is not model and type(fresh.original_model).__name__ == "LlamaForCausalLM"


def test_load_weights_refuses_another_architecture(tmp_path):
    model = ihprobe.load(save_checkpoint(tiny_hf_model("gpt-neox"), tmp_path / "neox"))
    other = save_checkpoint(tiny_hf_model("llama"), tmp_path / "llama")
    with pytest.raises(IhprobeError, match="another architecture"):
        swap.load_weights(model, other)


def test_a_swapped_in_checkpoint_names_itself(tmp_path):
    sources = [
        save_checkpoint(tiny_hf_model("gpt-neox", seed=seed), tmp_path / f"seed{seed}")
        for seed in (0, 1)
    ]
    (sources[1] / "ihprobe.json").write_text(json.dumps({"run": "second-run", "step": 3}))
    model = ihprobe.load(sources[0])
    swap.load_weights(model, sources[1])
    assert models.provenance(model).model == "second-run"  # its own ihprobe.json names it
    swap.load_weights(model, str(sources[0]))
    assert models.provenance(model).model == str(sources[0])  # the source, as load names it


def test_ablate_checkpoints_names_each_result_by_its_checkpoint(tmp_path):
    from ihprobe.dynamics.trajectories import ablate_checkpoints
    from ihprobe.io.runs import Checkpoint

    sources = [
        str(save_checkpoint(tiny_hf_model("gpt-neox", seed=seed), tmp_path / f"seed{seed}"))
        for seed in (0, 1)
    ]
    asked = {"top": 1, "draws": 1, "batch": 2, "metrics": ["induction_loss"]}
    results = ablate_checkpoints([Checkpoint(s) for s in sources], **asked)
    assert [r.provenance.model for r in results] == sources  # one model, swapped in
    assert [set(r.to_frame()["model"]) for r in results] == [{s} for s in sources]
