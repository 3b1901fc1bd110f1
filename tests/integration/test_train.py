"""The trainer: schedules, config checks, run directories, checkpoints that load, NaN stops."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch

from ihprobe import checkpoints, load
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import temporary_folder
from ihprobe.io.sources import resolve
from ihprobe.io.weights import read_state_dict
from ihprobe.training.schedule import checkpoint_steps, learning_rate
from ihprobe.training.trainer import TrainConfig, load_config, train
from tests.helpers import TINY_TRAIN


def tiny(tmp_path, name="run", **overrides) -> TrainConfig:
    """A config that trains in well under a second: 1 layer, d_model 16, B=4, C=16."""
    base = dict(out=str(tmp_path / name), **TINY_TRAIN)
    return TrainConfig(**{**base, **overrides})


def final_weights(run) -> dict[str, torch.Tensor]:
    return read_state_dict(resolve(checkpoints(run)[-1].source))


# ----------------------------------------------------------------------------- schedules


def test_learning_rate_warms_up_linearly_then_follows_a_half_cosine_to_zero():
    lrs = [learning_rate(s, lr=2.0, total=100, warmup=0.1) for s in range(100)]
    assert lrs[:10] == pytest.approx([2.0 * (i + 1) / 10 for i in range(10)])
    assert lrs[10] == pytest.approx(2.0)
    assert lrs[55] == pytest.approx(1.0)  # half-way through the decay: cos(pi/2)
    assert lrs[99] == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * 89 / 90)))
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    const = [learning_rate(s, lr=2.0, total=100, warmup=0.0, schedule="constant") for s in (0, 99)]
    assert const == [2.0, 2.0]


def test_log_checkpoints_are_geometric_in_tokens_and_include_both_ends():
    steps = checkpoint_steps("log", total=10_000, tokens_per_update=256, n=5)
    assert steps == [0, 1, 10, 100, 1000, 10_000]
    assert checkpoint_steps("linear", total=10, tokens_per_update=1, n=5) == [0, 2, 4, 6, 8, 10]


@pytest.mark.parametrize("spec", ["log", "linear"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 20])
def test_n_checkpoints_is_the_number_after_step_0(spec, n):
    # --n-checkpoints 2 used to write 4 log checkpoints (0, 1, sqrt(T), T)
    steps = checkpoint_steps(spec, total=10**6, tokens_per_update=64, n=n)
    assert steps[0] == 0 and steps[-1] == 10**6 and len(steps) == n + 1
    # on a short run points that round to the same update are saved once: fewer, never more
    assert len(checkpoint_steps(spec, total=40, tokens_per_update=64, n=n)) <= n + 1


def test_an_extended_schedule_goes_on_by_the_same_rule():
    log = checkpoint_steps("log", total=10_000, tokens_per_update=1, n=5, extended_to=1_000_000)
    assert log == [0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000]  # ratio 10 goes on
    linear = checkpoint_steps("linear", total=100, tokens_per_update=1, n=4, extended_to=180)
    assert linear == [0, 25, 50, 75, 100, 125, 150, 175, 180]  # spacing 25 goes on, and the end
    listed = checkpoint_steps([640], total=20, tokens_per_update=64, extended_to=40)
    assert listed == [0, 10, 20, 40]


def test_listed_checkpoints_round_token_counts_up_to_whole_updates():
    # 250k / 4096 = 61.04 -> 62, 500k -> 122.07 -> 123, 1M -> 244.1 -> 245; 0 and the end added
    steps = checkpoint_steps([250_000, 500_000, 1_000_000], total=300, tokens_per_update=4096)
    assert steps == [0, 62, 123, 245, 300]


def test_listed_checkpoints_beyond_the_budget_are_an_error():
    with pytest.raises(IhprobeError, match="outside the run's budget"):
        checkpoint_steps([10**9], total=10, tokens_per_update=64)


# ----------------------------------------------------------------------------- config checks


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"heads": 3}, "heads=3 does not divide d_model=16"),
        ({"steps": 0}, "budget is empty"),
        ({"steps": None, "tokens": 0}, "budget is empty"),
        ({"tokens": 1000}, "steps or as tokens, not both"),
        ({"grad_accum": 3}, "multiple of 3"),
        ({"arch": "mamba"}, "gpt-neox, llama, gpt2"),
        ({"kv_heads": 1}, "only for arch='llama'"),
        ({"arch": "llama", "heads": 4, "kv_heads": 3}, "kv_heads=3 must divide heads=4"),
        ({"warmup": 1.5}, "warmup=1.5"),
        ({"lr": float("nan")}, "lr=nan"),
        ({"producer_options": {"vocab_size": 64, "colour": 1}}, "colour"),
        ({"d_mlp": -1}, "d_mlp=-1 must be >= 0"),
        ({"arch": "gpt2", "d_mlp": 0}, "attention-only.*not 'gpt2'"),
    ],
)
def test_bad_configs_fail_before_anything_is_written(tmp_path, overrides, message):
    with pytest.raises(IhprobeError, match=message):  # NaN is refused as the config is built
        train(tiny(tmp_path, **overrides))
    assert not (tmp_path / "run").exists()


class ShortRows:
    """A producer that provides rows of at most 8 tokens whatever context is asked for."""

    name = "short"
    vocab_size = 32
    special: dict = {}

    def __init__(self, *, batch_size, context, seed=0, total_steps=1):
        self.batch_size = batch_size

    def sample(self, step):
        from ihprobe.data.base import Batch

        return Batch(tokens=torch.zeros(self.batch_size, 8, dtype=torch.long))

    def config(self):
        return {}


def test_a_context_longer_than_the_producer_provides_is_an_error(tmp_path, monkeypatch):
    from ihprobe import data

    monkeypatch.setitem(data.PRODUCERS, "short", ShortRows)
    with pytest.raises(IhprobeError, match="lower --context"):
        train(tiny(tmp_path, producer="short", producer_options={}))
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- a short run


@pytest.mark.parametrize("arch", ["gpt-neox", "llama", "gpt2"])
def test_a_short_run_writes_scheduled_checkpoints_that_hf_and_ihprobe_load(tmp_path, arch):
    from transformers import AutoModelForCausalLM

    kv = {"heads": 4, "kv_heads": 2} if arch == "llama" else {}
    config = tiny(tmp_path, arch=arch, **kv)
    run = train(config)

    found = checkpoints(run)
    assert [c.step for c in found] == [0, 4, 8]
    assert [c.tokens for c in found] == [0, 4 * 64, 8 * 64]  # B*C = 4*16 tokens per update
    tokens = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(0))
    for ckpt in found:
        meta = json.loads((run / "checkpoints" / f"step-{ckpt.step:06d}/ihprobe.json").read_text())
        assert (meta["batch_size"], meta["context"], meta["seed"]) == (4, 16, 0)
        assert meta["run"] == "run" and meta["model"]["arch"] == arch
        assert meta["data"]["producer"] == "iid" and meta["data"]["vocab_size"] == 64
        assert (meta["loss"] is None) == (ckpt.step == 0)
        hf = AutoModelForCausalLM.from_pretrained(ckpt.source, attn_implementation="eager")
        assert hf.config.num_hidden_layers == 1 and hf.config.vocab_size == 64
    # the final weights reach both loaders intact: same logits through HF and the bridge
    model = load(found[-1].source)
    with torch.no_grad():
        assert torch.allclose(model(tokens), hf(tokens).logits, atol=1e-4)
    assert model.cfg.n_heads == (4 if arch == "llama" else 2)
    # training moved the weights and the logged loss went down from ln(64)
    first, last = (read_state_dict(resolve(c.source)) for c in (found[0], found[-1]))
    assert any(not torch.equal(first[k], last[k]) for k in first)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [2, 4, 6, 8]
    assert metrics[0]["loss"] == pytest.approx(math.log(64), abs=0.3)
    run_meta = json.loads((run / "run.json").read_text())
    assert run_meta["checkpoint_steps"] == [0, 4, 8] and run_meta["steps"] == 8
    assert load_config(run) == config


@pytest.mark.parametrize("arch", ["gpt-neox", "llama"])
def test_an_attention_only_run_has_mlps_that_add_nothing_from_the_input(tmp_path, arch):
    from transformers import AutoModelForCausalLM

    run = train(tiny(tmp_path, arch=arch, d_mlp=0))
    final = checkpoints(run)[-1].source
    meta = json.loads((resolve(final) / "ihprobe.json").read_text())
    assert meta["model"]["d_mlp"] == 0
    hf = AutoModelForCausalLM.from_pretrained(final, attn_implementation="eager")
    model = load(final)
    tokens = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        assert torch.allclose(logits, hf(tokens).logits, atol=1e-4)
    assert model.cfg.d_mlp == 0
    # every layer's MLP output is one vector (its bias; zero without one) at every position
    for layer in range(model.cfg.n_layers):
        out = cache[f"blocks.{layer}.hook_mlp_out"]
        assert torch.equal(out, out[:1, :1].expand_as(out))
    assert (torch.count_nonzero(out) == 0) == (arch == "llama")


def test_an_existing_run_is_never_overwritten_and_a_finished_run_resumes_as_done(tmp_path):
    config = tiny(tmp_path, steps=4)
    run = train(config)
    before = final_weights(run)
    with pytest.raises(IhprobeError, match="--resume"):
        train(config)
    assert train(load_config(run, resume=True)) == run
    after = final_weights(run)
    assert all(torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(IhprobeError, match=r"lr: 0\.003 -> 0\.1"):
        train(load_config(run, resume=True, lr=0.1))


def test_gradient_accumulation_gives_the_same_update_as_the_whole_batch(tmp_path):
    whole = final_weights(train(tiny(tmp_path, "whole")))
    split = final_weights(train(tiny(tmp_path, "split", grad_accum=2)))
    for name in whole:
        assert torch.allclose(whole[name], split[name], atol=1e-5), name


def test_nan_loss_stops_with_a_message_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    import ihprobe.training.trainer as trainer

    real = trainer.causal_lm_loss
    calls = []

    def poisoned(model, tokens):
        calls.append(1)
        loss = real(model, tokens)
        return loss * float("nan") if len(calls) > 5 else loss

    monkeypatch.setattr(trainer, "causal_lm_loss", poisoned)
    with pytest.raises(IhprobeError, match="NaN/inf by update 6.*step-000004"):
        train(tiny(tmp_path))
    found = checkpoints(tmp_path / "run")
    assert [c.step for c in found] == [0, 4]
    for ckpt in found:
        assert all(torch.isfinite(t).all() for t in read_state_dict(resolve(ckpt.source)).values())


def test_cli_trains_with_producer_options_and_reports_bad_flags(tmp_path, capsys):
    from ihprobe.cli import main

    out = tmp_path / "cli"
    argv = ["train", "--out", str(out), "--producer", "iid", "--vocab-size", "32"]
    small = ["--layers", "1", "--heads", "2", "--d-model", "16", "-C", "16", "-B", "4"]
    assert main(argv + small + ["--steps", "3", "--checkpoints", "64,128", "--no-progress"]) == 0
    assert [c.step for c in checkpoints(out)] == [0, 1, 2, 3]
    config = load_config(out)
    assert config.producer_options == {"vocab_size": 32} and config.checkpoints == (64, 128)
    assert main(["train", "--out", str(out), "--resume"]) == 0  # finished: nothing to do
    assert main(["train", "--out", str(tmp_path / "bad"), "--heads", "5", "--steps", "1"]) == 2
    assert "heads=5 does not divide d_model=64" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "bad"), "--d-mlp", "-1"]) == 2
    assert "'-1' is not an integer >= 0" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "ao"), "--d-mlp", "0", "--arch", "gpt2"]) == 2
    assert "attention-only" in capsys.readouterr().err


def test_live_probes_log_what_a_fresh_scan_of_each_checkpoint_gives(tmp_path):
    from ihprobe import scan

    run = train(tiny(tmp_path, live_probes=True, probe_batch=8))
    records = [json.loads(line) for line in (run / "probes.jsonl").read_text().splitlines()]
    found = checkpoints(run)
    assert [r["step"] for r in records] == [c.step for c in found]
    for record, ckpt in zip(records, found, strict=True):
        scores = scan(load(ckpt.source), metrics=["prefix_matching", "ar_accuracy"], batch=8)
        ps = scores.head["prefix_matching"]
        assert record["max_prefix_matching"] == pytest.approx(float(ps.max()), abs=1e-6)
        assert ps[tuple(record["top_head"])] == ps.max()
        assert record["ar_accuracy"] == pytest.approx(float(scores.model["ar_accuracy"]))
        assert record["tokens"] == ckpt.tokens


def test_resume_clears_interrupted_writes_and_needs_a_training_state(tmp_path):
    run = train(tiny(tmp_path, steps=4))
    partial = temporary_folder(run / "checkpoints" / "step-000002")  # as a killed write leaves it
    (partial / "model.safetensors").write_bytes(b"cut short")
    train(load_config(run, resume=True))
    assert not partial.exists()
    assert [c.step for c in checkpoints(run)] == [0, 2, 4]
    for state in (run / "state").iterdir():
        state.unlink()
    with pytest.raises(IhprobeError, match="no training state"):
        train(load_config(run, resume=True))


def test_a_crash_between_checkpoints_resumes_from_the_last_state_to_identical_weights(
    tmp_path, monkeypatch
):
    import ihprobe.training.trainer as trainer

    config = tiny(tmp_path, steps=10, checkpoints=(0,), state_every=3)
    reference = final_weights(train(tiny(tmp_path, "reference", steps=10, checkpoints=(0,))))

    real, calls = trainer.causal_lm_loss, []

    def crash_in_update_8(model, tokens):
        calls.append(1)
        if len(calls) == 8:
            raise RuntimeError("power cut")
        return real(model, tokens)

    monkeypatch.setattr(trainer, "causal_lm_loss", crash_in_update_8)
    with pytest.raises(RuntimeError, match="power cut"):
        train(config)
    run = tmp_path / "run"
    assert [p.name for p in (run / "state").iterdir()] == ["step-000006.pt"]
    assert [c.step for c in checkpoints(run)] == [0]
    saved = torch.load(run / "state" / "step-000006.pt", weights_only=True)["train_seconds"]
    assert saved > 0 and "train_seconds" not in json.loads((run / "run.json").read_text())

    monkeypatch.setattr(trainer, "causal_lm_loss", real)
    started = time.perf_counter()
    train(load_config(run, resume=True))
    second_session = time.perf_counter() - started
    resumed = final_weights(run)
    assert [c.step for c in checkpoints(run)] == [0, 10]
    for name in reference:
        assert torch.equal(resumed[name], reference[name]), name
    # the wall time counts the first session up to its last state, then the second one
    total = json.loads((run / "run.json").read_text())["train_seconds"]
    assert float(saved) - 0.1 < total <= float(saved) + second_session + 0.1
    uninterrupted = json.loads((tmp_path / "reference" / "run.json").read_text())["train_seconds"]
    assert isinstance(uninterrupted, float) and uninterrupted >= 0  # a tiny run rounds to 0.0
