"""The probe engine: the metric table agrees with the metrics' definitions, and ``run_probe``
gives the same rows however they are chunked or stacked."""

from __future__ import annotations

import math

import pytest
import torch

import ihprobe
from ihprobe.probes import engine
from ihprobe.probes.engine import Probe, budget_rows, recall_probe, run_probe
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.metrics import METRIC_TABLE
from ihprobe.probes.recall import induction_loss_per_row
from tests.helpers import save_checkpoint, tiny_hf_model


@pytest.fixture(scope="module")
def model(tmp_path_factory, tokenizer):
    directory = tmp_path_factory.mktemp("engine")
    return ihprobe.load(save_checkpoint(tiny_hf_model("gpt2", context=64), directory, tokenizer))


def test_directions_follow_what_better_means():
    # a model that predicts perfectly: accuracy 1 and hits 1 are the best, losses 0 and rank 0
    best = {"ar_accuracy": 1, "hits@1": 1, "ar_mean_rank": 0, "induction_loss": 0}
    worst = {"ar_accuracy": 0, "hits@1": 0, "ar_mean_rank": 100, "induction_loss": 9}
    for name in best:
        harm = METRIC_TABLE[name].harm_sign * (worst[name] - best[name])
        assert harm > 0, name
    assert METRIC_TABLE["induction_loss"].chance(512, 50) == pytest.approx(math.log(512))
    # uniform causal attention averaged over second-half queries ~ ln(2) / n
    assert METRIC_TABLE["prefix_matching"].chance(512, 50) == pytest.approx(math.log(2) / 50, 0.02)


def test_chunks_and_stacked_groups_give_the_same_rows(model):
    tokens = repeated_tokens(model, n=20, batch=7, seed=0)
    probe = recall_probe(model, tokens, n=20)
    with torch.no_grad():
        whole = run_probe(model, probe, chunk=None)
        chunked = run_probe(model, probe, chunk=3, groups=2)  # rows stacked twice
        expected = induction_loss_per_row(model(tokens), tokens, n=20)
    assert torch.allclose(whole["induction_loss"], expected, atol=1e-5)
    for name, values in whole.items():
        assert torch.allclose(chunked[name], values.repeat(2), atol=1e-5)


def test_a_pass_never_holds_more_logits_than_the_budget(model, monkeypatch):
    """Pythia's 50k vocabulary at the default chunk held 25 rows of logits (2.4 GB peak on
    160m): the logits budget, not ``chunk``, must bound each pass, and it changes no number."""
    tokens = repeated_tokens(model, n=20, batch=7, seed=0)
    probe = recall_probe(model, tokens, n=20)
    sizes = []

    def count(index, store):
        sizes.append(len(index))
        return []

    with torch.no_grad():
        free = run_probe(model, probe, chunk=None)
        budget = 2 * probe.read * model.cfg.d_vocab + 1  # two rows of logits
        monkeypatch.setitem(engine.MAX_LOGITS, "cpu", budget)
        assert budget_rows(model, probe) == 2
        bounded = run_probe(model, probe, count, chunk=25)
    assert sizes == [2, 2, 2, 1]
    for name, values in free.items():
        assert torch.allclose(bounded[name], values, atol=1e-5)


def test_hooks_store_slices_and_an_empty_position_list_unembeds_nothing(model):
    tokens = repeated_tokens(model, n=10, batch=5, seed=1)
    seen = []

    def make_hooks(index, store):
        seen.append(index.tolist())

        def keep(z, hook):
            store["z0"] = z[:, -1]

        return [("blocks.0.attn.hook_z", keep)]

    probe = Probe("z only", tokens, positions=torch.zeros(0, dtype=torch.long))
    with torch.no_grad():
        out = run_probe(model, probe, make_hooks, chunk=2)
    assert seen == [[0, 1], [2, 3], [4]]
    assert out["z0"].shape == (5, model.cfg.n_heads, model.cfg.d_head)
