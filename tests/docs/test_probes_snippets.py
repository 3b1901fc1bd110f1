"""Snippet scores read what they claim: varied-length rows, a reference over the full cache,
planted heads (a fixed-offset positional head in the weights, content heads as patterns), and
the metric table, frame and docs. A model trained on backward snippets is in
``test_probes_snippets_trained.py``."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import ihprobe
from ihprobe.cli import main
from ihprobe.core.standin import id_tokenizer
from ihprobe.dynamics import changepoint
from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.probes import attention, inputs
from ihprobe.probes.metrics import METRIC_TABLE, SCAN_METRICS
from ihprobe.probes.snippets import BEHAVIOUR, COPIES, FIXED_SCORES
from tests.helpers import save_checkpoint, tiny_hf_model

VOCAB = 64
SNIPPET_METRICS = (*FIXED_SCORES, *attention.VARIED_PAIRS, *BEHAVIOUR)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods" / "scores.md"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 2-layer, 4-head GPT-NeoX over 64 ids (random weights)."""
    directory = tmp_path_factory.mktemp("snippets-small")
    save_checkpoint(tiny_hf_model("gpt-neox", vocab_size=VOCAB), directory, id_tokenizer(VOCAB))
    return ihprobe.load(directory)


def test_varied_rows_vary_in_length_and_pair_up(small):
    made = {c: inputs.varied_snippets(small, copy=c, batch=200, seed=4) for c in COPIES}
    lengths = made["forward"][1]
    assert len(set(lengths.tolist())) >= 15  # 10-30: no single offset
    assert lengths.min() >= 10 and lengths.max() <= 30
    for _, n in made.values():
        assert n.equal(lengths)  # the same S and |S| in every kind of row
    for row, L in enumerate(lengths.tolist()):
        s = made["forward"][0][row, :L]
        assert len(set(s.tolist())) == L  # distinct
        copies = {c: made[c][0][row, L + 1 : 2 * L + 1] for c in COPIES}
        assert copies["forward"].equal(s) and copies["backward"].equal(s.flip(0))
        assert sorted(copies["shuffled"].tolist()) == sorted(s.tolist())
        sep = made["forward"][0][row, L]
        assert (made["backward"][0][row, 2 * L + 1 :] == sep).all()  # padding after the copy
    shuffled, backward = made["shuffled"][0], made["backward"][0]
    assert (shuffled != backward).any(1).float().mean() > 0.95


@pytest.mark.parametrize("lengths", [(1, 5), (8, 4), (10, 200), (3,), "10-30"])
def test_bad_lengths_are_one_line_errors(small, lengths):
    with pytest.raises(ihprobe.IhprobeError, match="lengths") as err:
        ihprobe.scan(small, ["forward_induction_varied"], snippet_lengths=lengths)
    assert "\n" not in str(err.value)


def reference_varied(model, lengths, batch, seed) -> tuple[dict, dict]:
    """The varied-length scores from the full cache, one row and position at a time, with
    every key found by token equality rather than by position arithmetic."""
    rows = {
        c: inputs.varied_snippets(model, copy=c, lengths=lengths, batch=batch, seed=seed)
        for c in COPIES
    }
    caches = {c: model.run_with_cache(rows[c][0]) for c in COPIES}
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    pairs = {m: [] for m in attention.VARIED_PAIRS}  # (copy, row, query, key)
    behaviour = {"copy": [], "hits": [], "first": [], "shuffled": []}
    for b, L in enumerate(rows["forward"][1].tolist()):
        s = rows["forward"][0][b, :L].tolist()
        for p in range(L + 1, 2 * L):
            k = s.index(int(rows["forward"][0][b, p]))
            pairs["forward_induction_varied"].append(("forward", b, p, k + 1))
            k = s.index(int(rows["backward"][0][b, p]))
            pairs["backward_duplicate"].append(("backward", b, p, k))
        pairs["backward_previous_token"] += [("backward", b, k, k - 1) for k in range(1, L)]
        logits, x = caches["backward"][0][b], rows["backward"][0][b]
        losses = torch.nn.functional.cross_entropy(logits[:-1], x[1:], reduction="none")
        behaviour["copy"].append(losses[L + 1 : 2 * L].mean())
        behaviour["hits"].append(
            (logits[L + 1 : 2 * L].argmax(-1) == x[L + 2 : 2 * L + 1]).float().mean()
        )
        behaviour["first"].append(losses[: L - 1].mean())
        shuffled, y = caches["shuffled"][0][b], rows["shuffled"][0][b]
        behaviour["shuffled"].append(
            torch.nn.functional.cross_entropy(shuffled[L + 1 : 2 * L], y[L + 2 : 2 * L + 1])
        )
    head = {}
    for metric, found in pairs.items():
        head[metric] = torch.zeros(n_layers, n_heads)
        for layer in range(n_layers):
            for h in range(n_heads):
                values = [
                    float(caches[c][1][f"blocks.{layer}.attn.hook_pattern"][b, h, q, k])
                    for c, b, q, k in found
                ]
                head[metric][layer, h] = np.mean(values)
    mean = {key: float(torch.stack(v).mean()) for key, v in behaviour.items()}
    model_scores = {
        "backward_copy_loss": mean["copy"],
        "backward_copy_accuracy": mean["hits"],
        "backward_copy_vs_first_half": mean["first"] - mean["copy"],
        "backward_copy_vs_shuffled": mean["shuffled"] - mean["copy"],
    }
    return head, model_scores


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gpt2", "gpt-neox", "llama"])
def test_varied_scores_match_the_reference(arch, tmp_path):
    model = ihprobe.load(
        save_checkpoint(tiny_hf_model(arch, vocab_size=VOCAB), tmp_path, id_tokenizer(VOCAB))
    )
    metrics = [*attention.VARIED_PAIRS, *BEHAVIOUR]
    scores = ihprobe.scan(model, metrics, batch=5, seed=2, snippet_lengths=(4, 9), chunk=4)
    with torch.no_grad():
        head, model_scores = reference_varied(model, (4, 9), batch=5, seed=2)
    for metric, expected in head.items():
        assert torch.allclose(scores.head[metric], expected, atol=1e-5), (arch, metric)
    assert scores.model == pytest.approx(model_scores, abs=1e-4)


# ----------------------------------------------------------------------------- planted heads


def positional_head_model(directory: Path, offset: int = inputs.SNIPPET_LENGTH):
    """GPT-NeoX (rotary on every dimension) whose layer-0 head 0 looks ``offset`` tokens back,
    whatever the tokens: zero query and key weights, and biases whose rotary dot product is
    ``sum_i A^2 cos(theta_i (q - k - offset))``, largest at ``q - k = offset``."""
    cfg = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        rotary_pct=1.0,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    hf = GPTNeoXForCausalLM(cfg).eval()
    e = 64 // 4
    theta = 10000 ** (-torch.arange(e // 2).double() * 2 / e)
    qkv = hf.gpt_neox.layers[0].attention.query_key_value  # per head: [q | k | v]
    amplitude = 12.0
    with torch.no_grad():
        qkv.weight[: 2 * e] = 0.0
        qkv.bias[:e] = torch.cat([torch.full((e // 2,), amplitude), torch.zeros(e // 2)])
        qkv.bias[e : 2 * e] = amplitude * torch.cat(
            [torch.cos(offset * theta), torch.sin(offset * theta)]
        )
    return ihprobe.load(save_checkpoint(hf, directory, id_tokenizer(VOCAB)))


def test_a_fixed_offset_head_scores_on_fixed_lengths_only(tmp_path):
    model = positional_head_model(tmp_path)
    scores = ihprobe.scan(model, ["forward_induction_fixed", "forward_induction_varied"])
    fixed, varied = (scores.head[m][0, 0] for m in scores.head)
    assert fixed > 0.95  # every fixed-length pair sits 20 back
    chance = METRIC_TABLE["forward_induction_varied"].chance(VOCAB, 20)
    assert varied < 2 * chance  # only rows whose |S| happens to be 20 line up
    others = scores.head["forward_induction_varied"][0, 1:]  # random heads: about chance
    assert (others - chance).abs().max() < 0.5 * chance


def test_a_head_looking_n_minus_1_back_passes_prefix_matching_at_n_only(tmp_path):
    """Prefix matching at one repeat length ``n`` pairs each query with the key ``n - 1`` back,
    so a positional head at that offset scores high on it; at another ``n``, and on forward
    induction over varied snippets, it scores about chance (docs/methods/scores.md)."""
    n = 16
    model = positional_head_model(tmp_path, offset=n - 1)
    at_n = ihprobe.scan(model, ["prefix_matching"], n=n, batch=20).head["prefix_matching"]
    other = ihprobe.scan(model, ["prefix_matching"], n=n + 4, batch=20).head["prefix_matching"]
    varied = ihprobe.scan(model, ["forward_induction_varied"]).head["forward_induction_varied"]
    ps_chance = METRIC_TABLE["prefix_matching"].chance(VOCAB, n + 4)
    assert at_n[0, 0] > 0.95 and other[0, 0] < 2 * ps_chance
    assert varied[0, 0] < 2 * METRIC_TABLE["forward_induction_varied"].chance(VOCAB, 20)


def test_scan_names_a_head_that_passes_prefix_matching_by_a_fixed_offset(tmp_path, capsys):
    positional_head_model(tmp_path / "model", offset=15)
    metrics = "prefix_matching,forward_induction_varied"
    argv = [
        "scan",
        str(tmp_path / "model"),
        "--metrics",
        metrics,
        "-n",
        "16",
        "--batch",
        "20",
        "--out",
        str(tmp_path / "scan"),
    ]
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "note: " in line]
    assert len(notes) == 1 and notes[0].startswith("  note: L0H0 passes prefix_matching (")
    assert "but not forward_induction_varied (0.0" in notes[0]
    assert ", chance 0.033): it may look a fixed offset back" in notes[0]
    assert main([*argv[:-1], str(tmp_path / "again"), "-n", "20"]) == 0  # not n - 1 back
    assert "note: " not in capsys.readouterr().out


def test_emergence_says_when_the_heads_behind_a_rise_look_a_fixed_offset_back(
    tmp_path, capsys, monkeypatch
):
    """The change point itself is faked (its estimator is tested in test_emergence*); what is
    tested is the note on the heads of the checkpoint where the curve peaks: the positional
    head at n - 1 of step 10, which the drifted step 20 (another offset) no longer has."""
    run = tmp_path / "run"
    positional_head_model(run / "checkpoints" / "step-000010", offset=15)
    positional_head_model(run / "checkpoints" / "step-000020", offset=3)
    peaked = pd.DataFrame({"step": [10, 20], "tokens": [640, 1280], "value": [0.9, 0.1]})
    bracket = {"tokens": 600.0, "updates": 9.0, "step": 10, "tokens_low": 0.0, "tokens_high": 640.0}
    point = EmergencePoint("prefix_matching", "max", True, **bracket, model="run", curve=peaked)
    monkeypatch.setattr(changepoint, "run_emergence", lambda run_dir, **kw: point)
    argv = ["emergence", str(run), "-n", "16", "--batch", "20"]
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "note: " in line]
    assert len(notes) == 1
    assert notes[0].startswith("  note: at the peak (step 10) L0H0 passes prefix_matching")
    assert main([*argv, "--json", "--html", str(tmp_path / "em.html")]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["notes"] == [notes[0].removeprefix("  note: ")]
    assert notes[0].strip() in (tmp_path / "em.html").read_text()  # the page says it too
    assert main([*argv[:2], "-n", "20", "--batch", "20", "--json"]) == 0  # not n - 1 back
    assert json.loads(capsys.readouterr().out)[0]["notes"] == []
    late = replace(point, curve=peaked.assign(value=[0.1, 0.9]))  # peak at step 20: offset 3
    monkeypatch.setattr(changepoint, "run_emergence", lambda run_dir, **kw: late)
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["notes"] == []
    flat = replace(point, transition=False, reason="flat")
    monkeypatch.setattr(changepoint, "run_emergence", lambda run_dir, **kw: flat)
    assert main([*argv, "--json"]) == 0  # nothing rose: nothing to explain
    assert json.loads(capsys.readouterr().out)[0]["notes"] == []


def first_earlier(tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """``[batch, q, k]``: attention to the first earlier occurrence of the token at ``q``,
    plus ``shift``; to ``q`` itself when there is none or that key is outside ``[0, q]``."""
    t = tokens.shape[1]
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(t, t).tril(-1).bool()
    first = torch.where(earlier.any(-1), earlier.float().argmax(-1) + shift, -1)
    q = torch.arange(t).expand_as(first)
    key = torch.where((first >= 0) & (first <= q), first, q)
    return torch.nn.functional.one_hot(key, t).float()


def planted_content_heads():
    """Hooks that make layer 1's heads 0 an induction head (the token after the earlier
    occurrence), 1 previous-token, 2 duplicate-token and 3 [B]'s anti-induction pattern (the
    token before it), whatever rows run: the ids are read at ``embed.hook_in``."""
    seen = {}

    def read_ids(ids, hook):
        seen["ids"] = ids

    def plant(pattern, hook):
        ids = seen["ids"]
        b, t = ids.shape
        previous = torch.diag(torch.ones(t - 1), -1)
        previous[0, 0] = 1.0
        heads = [
            first_earlier(ids, 1),
            previous.expand(b, t, t),
            first_earlier(ids, 0),
            first_earlier(ids, -1),
        ]
        return torch.stack(heads, dim=1).to(pattern.dtype)

    return [("embed.hook_in", read_ids), ("blocks.1.attn.hook_pattern", plant)]


def test_planted_content_heads_score_on_fixed_and_varied_lengths(small):
    with small.hooks(fwd_hooks=planted_content_heads()):
        scores = ihprobe.scan(small, [*FIXED_SCORES, *attention.VARIED_PAIRS], batch=20)
    layer1 = {m: scores.head[m][1].tolist() for m in scores.head}
    assert layer1["forward_induction_fixed"][0] == 1.0  # a content induction head: both
    assert layer1["forward_induction_varied"][0] == 1.0
    assert layer1["backward_previous_token"][1] == 1.0  # the backward-copying circuit's parts
    assert layer1["backward_duplicate"][2] == 1.0
    assert layer1["anti_induction"][2] == 0.0  # ... which [B]'s score does not see
    assert layer1["anti_induction"][3] == 1.0  # [B]'s pattern, planted: no causal head finds it


def test_a_uniform_head_scores_its_chance(tmp_path):
    """Zero query weights: attention is uniform over the prefix, so each score is the mean
    of ``1 / (q + 1)`` over its pairs, and the table's chance is that for the default lengths."""
    hf = tiny_hf_model("llama", vocab_size=VOCAB)
    for layer in hf.model.layers:
        torch.nn.init.zeros_(layer.self_attn.q_proj.weight)
    model = ihprobe.load(save_checkpoint(hf, tmp_path, id_tokenizer(VOCAB)))
    scores = ihprobe.scan(model, list(attention.VARIED_PAIRS), batch=300, seed=1)
    _, lengths = inputs.varied_snippets(model, batch=300, seed=1)
    for metric in attention.VARIED_PAIRS:
        queries, _, valid = attention.varied_pairs(metric, lengths)
        exact = attention.uniform_chance(queries, valid)
        assert torch.allclose(scores.head[metric], torch.tensor(exact, dtype=torch.float32))
        table = METRIC_TABLE[metric].chance(VOCAB, 20)
        assert table == pytest.approx(exact, rel=0.1), metric


# ----------------------------------------------------------------------------- table and docs


def test_every_snippet_metric_has_a_table_row_a_frame_row_and_a_definition(small):
    text = DOCS.read_text()
    for metric in SNIPPET_METRICS:
        row = METRIC_TABLE[metric]
        assert row.family == "snippets" and metric in SCAN_METRICS
        assert math.isfinite(row.chance(VOCAB, 20))
        assert f"`{metric}`" in text, f"docs/methods/scores.md does not define {metric}"
    frame = ihprobe.scan(small, list(SNIPPET_METRICS), batch=4).to_frame()
    assert set(frame.metric) == set(SNIPPET_METRICS)


def test_scan_help_lists_every_scan_metric(capsys):
    from ihprobe.cli import main

    assert main(["scan", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    missing = [m for m in SCAN_METRICS if m not in shown]
    assert not missing, f"ihprobe scan --help does not list {missing}"
