"""The natural-text reference: a finished pilot seed exported as a folder that describes itself.

:func:`export` copies a run's final checkpoint (weights, config, tokenizer, and ``ihprobe.json``
with this machine's paths made portable), its ``probes.jsonl``, a ``recipe.json`` (the training
config, the corpus, what was measured) and a model card ``README.md`` written from those numbers.
``make reference`` calls it through ``python -m lab.studies natural --pilot d128-lr3e-3 --seed 0
--export reference/natural-docs``.

>>> portable({"text": str(cache_root() / "corpora" / "docs" / "train"), "n": [1]})
{'text': '$IHPROBE_CACHE/corpora/docs/train', 'n': [1]}
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

from ihprobe import causal_lm_loss, checkpoints, is_finished, load_hf, run_meta
from ihprobe.data import default_directory, load_corpus
from lab.studies.study import ROOT

RECIPE = "recipe.json"
CARD = "README.md"
CHECKPOINT_META, PROBES = "ihprobe.json", "probes.jsonl"  # files of a trainer run (ihprobe.io.runs)


def cache_root() -> Path:
    """ihprobe's cache root (``$IHPROBE_CACHE`` or ``~/.cache/ihprobe``): the corpus is its
    ``corpora/docs`` folder."""
    return default_directory().parents[1]


def live_probes(run: Path) -> list[dict]:
    """The finished run's live probes, one record per checkpoint (``probes.jsonl``)."""
    return [json.loads(line) for line in (run / PROBES).read_text().splitlines()]


def portable(value):
    """``value`` with this machine's paths spelled for any machine: the cache root as
    ``$IHPROBE_CACHE``, paths inside the repository relative to its root."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, str):
        for prefix, name in ((str(cache_root()), "$IHPROBE_CACHE"), (str(ROOT) + os.sep, "")):
            if value.startswith(prefix):
                return name + value[len(prefix) :]
    return value


def heldout_scores(checkpoint: Path, context: int, batch: int = 32) -> dict:
    """The checkpoint's mean next-token loss on the corpus's held-out split (consecutive
    windows of ``context`` tokens), beside the entropy of those tokens' own unigram
    distribution (the loss of the best model that ignores context)."""
    tokens = load_corpus(str(default_directory() / "heldout"), tokenizer=str(checkpoint)).tokens
    windows = torch.from_numpy(np.asarray(tokens[: len(tokens) // context * context], np.int64))
    windows = windows.view(-1, context)
    model = load_hf(checkpoint).eval()
    with torch.no_grad():
        losses = [
            float(causal_lm_loss(model, windows[i : i + batch])) * len(windows[i : i + batch])
            for i in range(0, len(windows), batch)
        ]
    counts = np.bincount(np.asarray(windows[:, 1:]).ravel())
    p = counts[counts > 0] / counts.sum()
    return {
        "heldout_tokens": int(windows.numel()),
        "heldout_loss": sum(losses) / len(windows),
        "heldout_unigram_entropy": float(-(p * np.log(p)).sum()),
    }


def script(pilot: str, seed: int, export: str) -> str:
    """The command ``make reference`` runs to train and export a reference.

    >>> script("d128-lr3e-3", 0, "reference/natural-docs").split(" -m ")[1]
    'lab.studies natural --pilot d128-lr3e-3 --seed 0 --export reference/natural-docs'
    """
    study = f"lab.studies natural --pilot {pilot} --seed {seed} --export {export}"
    return f"nice -n 10 .venv/bin/python -m {study}"


def recipe_of(run: Path, pilot: str, summary: dict, out: Path) -> dict:
    """What ``recipe.json`` holds: how the run was made, from what, and what it measured."""
    meta, final = run_meta(run), Path(checkpoints(run)[-1].source)
    records = live_probes(run)
    manifest = json.loads((default_directory() / "manifest.json").read_text())
    vocab = meta["model"]["vocab_size"]
    with safe_open(final / "model.safetensors", "pt") as weights:
        parameters = sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())
    command = script(pilot, meta["config"]["seed"], portable(str(out.resolve())))
    return {
        "name": out.name,
        "pilot": pilot,
        "command": "make reference",
        "script": command,
        "run": portable(str(run.resolve())),
        "final_checkpoint": final.name,
        "sha256": json.loads((final / CHECKPOINT_META).read_text())["sha256"],
        "parameters": parameters,
        **portable(
            {
                k: meta[k]
                for k in (
                    "config",
                    "steps",
                    "tokens",
                    "tokens_per_update",
                    "checkpoint_steps",
                    "model",
                    "versions",
                )
            }
        ),
        "corpus": {
            "sources": manifest["sources"],
            "held_out_percent": manifest["held_out_percent"],
            "train_tokens": manifest["tokens"][f"bpe{vocab}"]["train"],
            "heldout_tokens": manifest["tokens"][f"bpe{vocab}"]["heldout"],
        },
        "measured": {
            "first": records[0],
            "final": records[-1],
            "best": max(records, key=lambda r: r["max_prefix_matching"]),
            "formed_at_tokens": next(
                (r["tokens"] for r in records if r["max_prefix_matching"] > 0.3), None
            ),
            "law_multiple": summary["law_x"],
            "train_seconds": summary["train_s"],
            "final_train_loss": json.loads((final / CHECKPOINT_META).read_text())["loss"],
            **heldout_scores(final, meta["model"]["context"]),
        },
    }


def export(run: Path, out: Path, *, pilot: str, summary: dict) -> Path:
    """Copy the finished ``run`` into ``out`` (replacing an earlier export there)."""
    if not is_finished(run):
        sys.exit(f"{run} has not finished training: run it first (--pilot {pilot}).")
    out = Path(out)
    if out.exists() and not (out / RECIPE).is_file():
        sys.exit(f"{out} exists and is not an earlier export (no {RECIPE}); pass a new folder.")
    final = Path(checkpoints(run)[-1].source)
    staged = out.with_name(out.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    # written whole beside ``out``, then renamed over it (an interrupted export's is removed)
    staged.mkdir(parents=True)
    for file in sorted(final.iterdir()):
        if file.name != CHECKPOINT_META:
            shutil.copyfile(file, staged / file.name)
    meta = portable(json.loads((final / CHECKPOINT_META).read_text()))
    meta["run"] = out.name  # what results name the model by (the run's own folder was seed0)
    (staged / CHECKPOINT_META).write_text(json.dumps(meta, indent=2) + "\n")
    shutil.copyfile(run / PROBES, staged / PROBES)
    recipe = recipe_of(run, pilot, summary, out)
    (staged / RECIPE).write_text(json.dumps(recipe, indent=1) + "\n")
    (staged / CARD).write_text(model_card(recipe, live_probes(run)))
    shutil.rmtree(out, ignore_errors=True)
    staged.rename(out)
    print(f"exported {run} to {out}")
    return out


def model_card(recipe: dict, records: list[dict]) -> str:
    """The folder's ``README.md``: what the model is, what it scores (``records``: its live
    probes), how it was made."""
    m, x = recipe["model"], recipe["measured"]
    final, first = x["final"], x["first"]
    head = "L{}H{}".format(*final["top_head"])
    intro = [
        f"# {recipe['name']}: induction heads formed from natural text",
        "",
        f"A {m['layers']}-layer GPT-NeoX language model ({m['heads']} heads per layer, d_model "
        f"{m['d_model']}, d_head {m['d_model'] // m['heads']}, MLP width {m['d_mlp']}, a "
        f"{m['vocab_size']}-id byte-level BPE; {recipe['parameters']:,} parameters in float32 "
        "safetensors) trained from scratch on software documentation. Its head "
        f"{head} has the attention of an induction head: on rows of random tokens repeated once "
        "it attends from each token of the second copy to the token that followed the same "
        f"token in the first (max prefix matching {final['max_prefix_matching']:.3f}, "
        f"{'above' if final['max_prefix_matching'] > 0.3 else 'below'} the 0.3 at which the "
        f"project counts a head as formed; {first['max_prefix_matching']:.3f} at "
        "initialisation).",
        "",
        "It is the project's natural-text reference for tests and notebooks: "
        '`ihprobe.load("reference/natural-docs")` loads it offline (safetensors; nothing in the '
        "folder is executed).",
        "",
    ]
    return "\n".join(intro + _scores(recipe, head, records) + _recipe(recipe) + _making(recipe))


def _scores(recipe: dict, head: str, records: list[dict]) -> list[str]:
    x = recipe["measured"]
    final, best, first, formed = x["final"], x["best"], x["first"], x["formed_at_tokens"]
    curve = ", ".join(f"{r['tokens'] / 1e6:.1f}: {r['max_prefix_matching']:.3f}" for r in records)
    return [
        "## Scores",
        "",
        "Live probes: 20 rows of 50 distinct random ids repeated once, seed 0 (`probes.jsonl`). "
        "Associative-recall accuracy: the share of second-copy positions whose top prediction "
        "is the next token of the copy.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| max prefix matching, final checkpoint ({head}) | {final['max_prefix_matching']:.3f} |",
        f"| highest max prefix matching of a live probe | {best['max_prefix_matching']:.3f} "
        f"at {best['tokens'] / 1e6:.1f}M tokens |",
        "| first live probe over 0.3 | "
        + (f"{formed / 1e6:.1f}M tokens |" if formed else "none |"),
        f"| associative-recall accuracy, final (initialisation) | {final['ar_accuracy']:.3f} "
        f"({first['ar_accuracy']:.3f}) |",
        f"| training loss, last update | {x['final_train_loss']:.3f} nats/token |",
        f"| held-out loss ({x['heldout_tokens']:,} tokens) | {x['heldout_loss']:.3f} nats/token |",
        f"| unigram entropy of those held-out tokens | {x['heldout_unigram_entropy']:.3f} "
        "nats/token |",
        "",
        f"Max prefix matching at each live probe (training tokens in millions: score): {curve}.",
        "",
    ]


def _recipe(recipe: dict) -> list[str]:
    c, x, corpus = recipe["config"], recipe["measured"], recipe["corpus"]
    packages = ", ".join(
        f"`{s['package']}` {s['version']} ({s['licence']})" for s in corpus["sources"].values()
    )
    return [
        "## Recipe and regime",
        "",
        f"Context C {c['context']}, batch B {c['batch_size']}, AdamW at lr {c['lr']:g} "
        f"(weight decay {c['weight_decay']:g}, gradient clip {c['grad_clip']:g}), linear warm-up "
        f"over the first {c['warmup']:.0%} of updates then constant, seed {c['seed']}, "
        f"{recipe['tokens']:,} tokens ({recipe['steps']:,} updates: {x['law_multiple']:.2f} "
        "times the updates the emergence law `U = 750,000 / (B^0.37 C^0.62)` predicts for this "
        f"B and C), {c['n_checkpoints']} evenly spaced checkpoints, each probed as it was "
        f"written. Trained on a CPU with torch {recipe['versions']['torch']}: "
        f"{x['train_seconds'] / 3600:.1f} core-hours on a shared machine. Pilot "
        f"`{recipe['pilot']}` of `lab/studies/natural`; every pilot and its "
        "outcome is in `lab/studies/natural/RESULTS_papers_natural.md`.",
        "",
        f"Corpus: the documentation that {packages} install, built by `make corpus` (`ihprobe "
        f"corpus build`): {corpus['train_tokens']:,} training tokens and "
        f"{corpus['heldout_tokens']:,} held-out tokens (a fixed {corpus['held_out_percent']}% of "
        "the files, chosen by a hash of each file's name) under the BPE, which was trained on the "
        "training split alone. The run saw the training split about "
        f"{recipe['tokens'] / corpus['train_tokens']:.1f} times.",
        "",
    ]


def _making(recipe: dict) -> list[str]:
    steps = recipe["checkpoint_steps"]
    # what the Makefile runs now; recipe.json keeps the command of its own export
    today = script(
        recipe["pilot"], recipe["config"]["seed"], recipe["script"].split("--export ")[-1]
    )
    return [
        "## How it was made",
        "",
        "```bash",
        "make corpus     # once: installs the Debian documentation packages, builds the corpus",
        "make reference  # trains the run (or resumes or reuses it) and exports it here",
        "```",
        "",
        f"`make reference` runs `{today}`. The run it trains, `{recipe['run']}`, "
        f"holds the full series of {len(steps)} checkpoints (step 0 and every {steps[1]:,} "
        "updates); training is deterministic per seed on one machine, but not across machines: "
        "another CPU (or another torch build) can order floating-point sums differently, and "
        "over 30M tokens the run can drift to another model. So the command trains the same "
        "recipe and seed, not necessarily these weights; compare the SHA-256 that `ihprobe.json` "
        f"records (`{recipe['sha256']['model.safetensors'][:16]}...`) to know whether it did. A "
        "retrain of one of the contrast's Bi-Induct seeds on another CPU formed no head by 30M "
        "tokens where the recorded run had one, so treat this folder, not the command, as the "
        "reference.",
        "",
        "Files: the final checkpoint (`config.json`, `generation_config.json`, "
        "`model.safetensors`, `tokenizer.json`, `tokenizer_config.json`, `ihprobe.json`), the "
        "live probes of every checkpoint (`probes.jsonl`) and `recipe.json` (the training config "
        "and every number above).",
        "",
    ]
