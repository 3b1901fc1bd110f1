"""Corpus statistics on planted streams, and the `ihprobe data-stats` command."""

from __future__ import annotations

import json
import re

import pytest
import torch

from ihprobe.cli import main
from ihprobe.data.repetition import steady_state_repetition
from ihprobe.data.stats import corpus_stats, entropies, repetition_reliability, zipf_exponent

pytestmark = pytest.mark.usefixtures("cache_dir")  # an empty data cache for every test


def test_repetition_and_reliability_by_hand():
    # positions 3..6 repeat; after a repeated A, B follows A's most recent occurrence 3 times of 4
    x = torch.tensor([[5, 6, 7, 5, 6, 7, 5, 9]])
    assert repetition_reliability(x, 8) == (0.5, 0.75)
    assert repetition_reliability(x, 8, start=4) == (0.75, 2 / 3)
    # a stream is cut into windows: a repeat across the window boundary does not count
    rep, rel = repetition_reliability(torch.tensor([1, 2, 3, 4, 1, 2, 3, 4]), 4)
    assert rep == 0.0 and rel != rel  # no repeats at all: reliability undefined (nan)


def test_entropies_and_zipf_on_planted_streams():
    cycle = torch.arange(4).repeat(1000)
    h2, h1 = entropies(cycle, 64)
    assert h1 == pytest.approx(2.0, abs=1e-6) and h2 == pytest.approx(0.0, abs=1e-6)
    g = torch.Generator().manual_seed(0)
    iid = torch.randint(4, (200_000,), generator=g)
    h2, h1 = entropies(iid, 100)
    assert h1 == pytest.approx(2.0, abs=0.01) and h2 == pytest.approx(2.0, abs=0.01)
    counts = [round(10_000 * r**-1.5) for r in range(1, 30)]
    planted = torch.cat([torch.full((c,), i) for i, c in enumerate(counts)])
    assert zipf_exponent(planted) == pytest.approx(1.5, abs=0.02)
    big = torch.randint(
        50_000, (20_000,), generator=g
    )  # a GPT-2-sized vocabulary: counted sparsely
    h2, h1 = entropies(big, 100)
    assert h2 <= h1 and h1 == pytest.approx(14.0, abs=0.3)
    stats = corpus_stats(iid, 100)
    assert set(stats) >= {"repetition", "reliability", "bigram_entropy", "unigram_entropy"}


def test_cli_semi_natural_json(capsys):
    argv = ["data-stats", "--producer", "semi-natural", "--repetition", "0.9"]
    argv += ["--reliability", "0.5", "--vocab-size", "300", "--batches", "4", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("repetition", "reliability", "bigram_entropy", "unigram_entropy", "zipf_exponent"):
        assert isinstance(out[key], float)
    assert out["reliability"] == pytest.approx(0.5, abs=0.03)
    # measured on second halves, which start with a transient: below the steady state
    assert 0.6 < out["repetition"] <= steady_state_repetition(0.9, 0.5) + 0.02


def test_cli_natural_text_and_bi_induct(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("one two three four five six seven eight nine ten. " * 100)
    assert main(["data-stats", "--text", str(text), "--vocab-size", "280", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["producer"] == "natural" and out["repetition"] > 0.5  # a very repetitive text
    argv = ["data-stats", "--producer", "bi-induct", "--option", "base=iid", "--vocab-size", "64"]
    argv += ["--total-steps", "1000", "--option", "snippet_length=10", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["snippet_fraction"] == pytest.approx(0.5, abs=0.05)


def test_cli_bad_input_is_one_line_and_exit_2(capsys):
    assert main(["data-stats", "--producer", "semi-natural", "--reliability", "2"]) == 2
    err = capsys.readouterr().err
    assert "not a probability" in err and len(err.strip().splitlines()) == 1
    assert main(["data-stats", "--producer", "iid", "--option", "oops"]) == 2


def test_cli_text_echoes_the_request_and_gives_units(capsys):
    argv = ["data-stats", "--producer", "semi-natural", "--repetition", "0.9"]
    argv += ["--reliability", "0.5", "--vocab-size", "300", "--batches", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "requested: " in out and "reliability=0.5" in out and "repetition=0.9" in out
    assert re.search(r"bigram_entropy: [\d.]+ bits", out)
