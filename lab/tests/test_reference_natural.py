"""The committed natural-text reference (``reference/natural-docs``, made by ``make reference``):
it loads offline without running code from it, its induction head is found by the project's
probe and by HF's own attentions alike, and its files say how it was made in portable terms;
a smaller version of its recipe trains end to end on text written here (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import ihprobe
from ihprobe.data.corpus import default_documents
from ihprobe.data.text import load_corpus
from ihprobe.io.runs import METRICS, PROBES, RUN_META, RunDir
from ihprobe.probes.inputs import repeated_tokens
from lab.studies.natural import reference as natural_reference
from tests.helpers import hf_prefix_matching

ROOT = Path(__file__).resolve().parents[2]

REFERENCE = ROOT / "reference" / "natural-docs"
FORMED = 0.3  # max prefix matching at which the project counts a head as formed
AGREE = 1e-5  # the probe's prefix matching and HF's, float32 on the same tokens


def live_probes(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / PROBES).read_text().splitlines()]


@pytest.fixture(scope="module")
def reference():
    """The reference loaded with unpickling disabled: a pickle or remote code would fail."""

    def refuse(*args, **kwargs):
        raise AssertionError("loading the reference unpickled a file")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "load", refuse)
        return ihprobe.load(REFERENCE)


def test_the_folder_holds_data_only():
    names = {p.name for p in REFERENCE.iterdir()}
    assert names == {
        "README.md",
        "config.json",
        "generation_config.json",
        "ihprobe.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        natural_reference.RECIPE,
        PROBES,
    }
    assert sum(p.stat().st_size for p in REFERENCE.iterdir()) < 4e6  # small enough to commit


def test_the_reference_has_an_induction_head_by_the_probe_and_by_hf_attentions(reference):
    tokens = repeated_tokens(reference, batch=20, seed=0)  # the rows of its live probes
    ps = ihprobe.scan(reference, ["prefix_matching"], tokens=tokens).head["prefix_matching"]
    layer, head = divmod(int(ps.argmax()), ps.shape[1])
    final = live_probes(REFERENCE)[-1]
    assert ps.max() > FORMED
    assert [layer, head] == final["top_head"]
    assert float(ps.max()) == pytest.approx(final["max_prefix_matching"], abs=AGREE)
    hf = AutoModelForCausalLM.from_pretrained(REFERENCE, local_files_only=True).eval()
    by_hf = hf_prefix_matching(hf, tokens)
    assert int(by_hf.argmax()) == int(ps.argmax())
    assert abs(float(by_hf[layer, head]) - float(ps[layer, head])) < AGREE


def strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


def test_the_recipe_is_portable_and_the_model_card_is_its_numbers():
    recipe = json.loads((REFERENCE / natural_reference.RECIPE).read_text())
    meta = json.loads((REFERENCE / "ihprobe.json").read_text())
    for text in [*strings(recipe), *strings(meta)]:
        assert not text.startswith(("/", "~")) and str(Path.home()) not in text, text
    assert recipe["config"]["producer_options"]["text"] == "$IHPROBE_CACHE/corpora/docs/train"
    assert recipe["sha256"] == meta["sha256"] and recipe["steps"] == meta["step"]
    assert recipe["measured"]["final"] == live_probes(REFERENCE)[-1]
    card = natural_reference.model_card(recipe, live_probes(REFERENCE))
    assert (REFERENCE / natural_reference.CARD).read_text() == card  # no number edited by hand


def test_portable_paths_name_the_cache_and_the_repository_for_any_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "cache"))
    paths = [str(tmp_path / "cache" / "corpora"), str(ROOT / "runs" / "x"), "/elsewhere", 3]
    assert natural_reference.portable({"paths": paths}) == {
        "paths": ["$IHPROBE_CACHE/corpora", "runs/x", "/elsewhere", 3]
    }


# ----------------------------------------------------------------------------- the recipe, small

SMALL = [
    "--producer",
    "natural",
    "--vocab-size",
    "300",
    "--layers",
    "2",
    "--heads",
    "4",
    "--d-model",
    "64",
    "-C",
    "64",
    "-B",
    "8",
    "--lr",
    "3e-3",
    "--schedule",
    "constant",
    "--checkpoints",
    "linear",
    "--n-checkpoints",
    "4",
    "--live-probes",
    "-q",
    "--device",
    "cpu",
]
TOKENS, EXTENDED = 100_000, 150_000


def write_documents(root: Path) -> tuple[Path, Path]:
    """The embedded corpus as one file per document, every tenth held out."""
    for i, text in enumerate(default_documents()):
        folder = root / ("heldout" if i % 10 == 0 else "train")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"doc{i:03d}.txt").write_text(text)
    return root / "train", root / "heldout"


def heldout_loss_and_unigram_entropy(checkpoint: str, heldout: Path, context: int):
    """Mean next-token loss of the checkpoint on consecutive windows of the held-out text, and
    the entropy of the predicted tokens' own unigram distribution (the best any model that
    ignores context can do on them)."""
    stream = load_corpus(str(heldout), tokenizer=checkpoint).tokens
    windows = torch.from_numpy(np.asarray(stream[: len(stream) // context * context], np.int64))
    windows = windows.view(-1, context)
    with torch.no_grad():
        logits = ihprobe.load(checkpoint)(windows)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), windows[:, 1:].ravel())
    counts = np.bincount(windows[:, 1:].numpy().ravel())
    p = counts[counts > 0] / counts.sum()
    return float(loss), float(-(p * np.log(p)).sum())


@pytest.mark.slow
def test_a_small_version_of_the_recipe_trains_end_to_end_and_extends(tmp_path):
    from ihprobe.cli import main

    train_text, heldout = write_documents(tmp_path / "text")
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--out",
                str(run),
                "--option",
                f"text={train_text}",
                "--tokens",
                str(TOKENS),
                *SMALL,
            ]
        )
        == 0
    )
    found = ihprobe.checkpoints(run)
    assert len(found) == 5 and abs(found[-1].tokens - TOKENS) < 8 * 64  # B C per update
    probes = RunDir(run).records(PROBES)
    assert [r["step"] for r in probes] == [c.step for c in found]  # a live probe per checkpoint
    assert all(0 <= r["max_prefix_matching"] <= 1 for r in probes)
    loss, entropy = heldout_loss_and_unigram_entropy(found[-1].source, heldout, context=64)
    assert loss < entropy, (loss, entropy)  # it learnt to use context, not only frequencies
    before = {c.step: (Path(c.source) / "ihprobe.json").read_text() for c in found}

    assert main(["train", "--out", str(run), "--resume", "--tokens", str(EXTENDED)]) == 0
    longer = ihprobe.checkpoints(run)  # the first five kept, more on the same rule after them
    assert [c.step for c in longer[: len(found)]] == [c.step for c in found]
    assert len(longer) > len(found) and abs(longer[-1].tokens - EXTENDED) < 8 * 64
    assert all((Path(c.source) / "ihprobe.json").read_text() == before[c.step] for c in found)
    assert [r["step"] for r in RunDir(run).records(PROBES)] == [c.step for c in longer]
    metrics = RunDir(run).records(METRICS)
    steps = [m["step"] for m in metrics]
    assert steps == sorted(set(steps)) and steps[-1] == longer[-1].step  # each update once
    assert {m["lr"] for m in metrics if m["step"] > found[-1].step} == {3e-3}  # still constant
    (extension,) = json.loads((run / RUN_META).read_text())["extensions"]
    assert extension == {
        "from_steps": found[-1].step,
        "to_steps": longer[-1].step,
        "from_tokens": found[-1].tokens,
        "to_tokens": longer[-1].tokens,
    }


def test_export_replaces_an_earlier_export_whole(tmp_path, monkeypatch):
    """The export copies the final checkpoint (its record made portable and named after the
    folder), the live probes, the recipe and the card into a staging folder, then renames it
    over an earlier export; a folder that is no export is refused (recipe and card stubbed:
    they read the documentation corpus)."""
    from tests.helpers import TINY_TRAIN

    config = ihprobe.TrainConfig(
        out=str(tmp_path / "run"), live_probes=True, probe_batch=4, **TINY_TRAIN
    )
    run = ihprobe.train(config)
    monkeypatch.setattr(natural_reference, "recipe_of", lambda *a: {"steps": 8})
    monkeypatch.setattr(natural_reference, "model_card", lambda recipe, records: f"{records}\n")
    out = tmp_path / "reference" / "tiny"
    out.mkdir(parents=True)
    (out / "recipe.json").write_text("{}")  # an earlier export
    (out / "stale.txt").write_text("left by the earlier export")
    natural_reference.export(Path(run), out, pilot="p", summary={})
    final = Path(ihprobe.checkpoints(run)[-1].source)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [p.name for p in final.iterdir()] + ["probes.jsonl", "recipe.json", "README.md"]
    )
    assert json.loads((out / "ihprobe.json").read_text())["run"] == "tiny"
    assert live_probes(out) == live_probes(Path(run)) and len(live_probes(out)) == 3
    assert (out / "README.md").read_text() == f"{live_probes(Path(run))}\n"
    assert not out.with_name("tiny.new").exists()
    (tmp_path / "mine").mkdir()
    with pytest.raises(SystemExit, match="not an earlier export"):
        natural_reference.export(Path(run), tmp_path / "mine", pilot="p", summary={})
