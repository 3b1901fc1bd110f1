"""[B]'s contrast on the natural-text recipe that forms induction heads (``--recipe docs``).

The recipe (regime) is the natural-text pilot ``d128-lr3e-3`` of the natural study
(``lab/studies/natural``, issue 23): GPT-NeoX 2 layers x 4 heads, d_model 128 with MLPs (d_head 32),
B 4, C 256, AdamW lr 3e-3 constant after a 1% warm-up, grad clip 1, 30M tokens (29,297 updates, 2x
the law's), 24 linear checkpoints with live probes, the documentation corpus's ``train/`` split
under its 512-id BPE. Every arm gets exactly that TrainConfig (:func:`config`); the Bi-Induct arms
only swap the producer for ``bi-induct`` over the same text (span 20, m0 0.5 linear anneal, token
mixing), so every arm sees the same number of tokens and updates.

The natural arm **is** the pilot's runs (``runs/validate-papers/natural/d128-lr3e-3/seedS``):
:func:`pilot_run` scores a finished one whose ``run.json`` holds the same config, and refuses
one that is missing, unfinished or different. A seed continued past the budget with the pilot
script's ``--extend`` is scored at its checkpoint at the budget (:func:`scored_checkpoint`; the
schedule is constant there, so that checkpoint is the one an unextended run ends with), and its
live probes and wall time are counted up to it. Nothing here trains or writes into a pilot run:
the arm's result goes to ``contrast-docs/natural/seedS/result.json`` and the results CSV.

Measured per arm and seed beyond the contrast's own scores (:func:`measures`):

* emergence from the run's live probes (max prefix matching at 25 checkpoints, 20 rows of
  repeated random tokens): the change point of ``ihprobe.dynamics.changepoint.emergence`` with
  its bracketing checkpoints, and, as a second definition, the first checkpoint at PS >= 0.3;
* held-out perplexity: mean next-token loss over the whole ``heldout/`` split (every document,
  joined by EOS, cut into rows of C tokens);
* function-style ICL accuracy: HITS@1 and HITS@3 of the seven built-in few-shot tasks
  (``ihprobe.causal.tasks``, 24 prompts each, 5 shots where they fit in C), clean and under
  [B]'s per-layer top-2% ablation; from issue 60 on, every built-in task's clean HITS@1 and
  relative drop under it, [B]'s own quantity (``lab/studies/contrast/task_drop.py``);
* centrality: every head ablated alone (``ihprobe.head_effects``, mean ablation); the top
  head's share of the summed positive harm to induction loss (1/8 = spread evenly, 1 = one head).

Claims added (:func:`claims`, regions declared before the data, Welch's t over seeds): "natural-
only circuits are more central and load-bearing than Bi-Induct ARM ones" has two parts, natural
- ARM of the top head's share above 0 and of [B]'s per-layer index above 0, joined by
``verdicts.judge_all`` (agrees only when both agree, disagrees when either disagrees); "natural-
only reaches a higher function-style ICL accuracy than Bi-Induct ARM": natural - ARM HITS@1
above 0. Like every contrast claim, "pending: n of 5 seeds" until each arm has 5.

>>> RECIPE["pilot"], RECIPE["tokens"]
('d128-lr3e-3', 30000000)
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import ihprobe
from ihprobe import (
    METRIC_TABLE,
    Checkpoint,
    TrainConfig,
    checkpoints,
    is_finished,
    run_meta,
    token_losses,
    token_rows,
)
from ihprobe.data import TEXT_SUFFIXES
from ihprobe.dynamics.verdicts import above, t_mean, welch
from ihprobe.jobs.grid import markdown, other_config
from lab.studies.natural import run as natural

PILOT = "d128-lr3e-3"
RECIPE = {"pilot": PILOT, **natural.PILOTS[PILOT]}
FORMED = METRIC_TABLE["prefix_matching"].threshold  # 0.3: the crossing that counts as a head
TASK_METRICS = ("hits@1", "hits@3", "icl_score")  # measured in the per-layer ablation


def config(arm: str, producer: str, options: dict, seed: int, out: str) -> TrainConfig:
    """The pilot's TrainConfig for ``seed``, as it is for the natural arm; a Bi-Induct arm's
    differs only in its producer, its snippet options and its run folder."""
    pilot = natural.config_of(PILOT, seed)
    if producer == "natural":
        return pilot
    snippets = {k: v for k, v in options.items() if k != "vocab_size"}
    return replace(
        pilot,
        out=str(Path(out) / arm / f"seed{seed}"),
        producer=producer,
        producer_options={**pilot.producer_options, **snippets},
    )


def budget_step(run: Path) -> int | None:
    """The update at which a pilot run continued past its budget (``--extend``) had finished
    that budget: the first extension's start in ``run.json``; None for a run never extended.
    The schedule is constant after its warm-up, so the checkpoint there is the one a run
    stopped at the budget ends with."""
    extensions = (run_meta(run) or {}).get("extensions") or []
    return int(extensions[0]["from_steps"]) if extensions else None


def scored_checkpoint(run: Path) -> Checkpoint:
    """The checkpoint the natural arm scores: the run's last, or, for an extended run, the one
    at the recipe's budget (:func:`budget_step`), so every arm is scored at the same compute."""
    step = budget_step(run)
    found = checkpoints(run)
    return found[-1] if step is None else next(c for c in found if c.step == step)


def pilot_problem(pilot: TrainConfig) -> str:
    """Why the natural arm cannot score the pilot run of ``pilot`` yet: missing, unfinished,
    trained with another config, or extended without a checkpoint at the recipe's budget; ""
    when it can (this script never trains it)."""
    run, seed = Path(pilot.out), pilot.seed
    again = f"python -m lab.studies natural --pilot {PILOT} --seed {seed}"
    if not is_finished(run):
        return (
            f"natural seed {seed}: the pilot run {run} is not finished; it is trained by "
            f"`{again}`, then scored here."
        )
    step, expected = budget_step(run), math.ceil(pilot.tokens / (pilot.batch_size * pilot.context))
    extended = step is not None
    if extended and (step != expected or step not in {c.step for c in checkpoints(run)}):
        return (
            f"natural seed {seed}: {run} was extended from update {step}, not from the "
            f"recipe's budget ({expected}) with a checkpoint there; it cannot be scored at "
            "the recipe's compute."
        )
    changed = other_config(run, pilot, ignore=("tokens",) if extended else ())
    if changed:
        return (
            f"natural seed {seed}: {run} was trained with another config ({changed}); "
            f"the contrast needs the pilot's own (`{again}`)."
        )
    return ""


def pilot_run(pilot: TrainConfig) -> Path:
    """The finished pilot run the natural arm scores; exits with :func:`pilot_problem`'s line
    when there is none."""
    problem = pilot_problem(pilot)
    if problem:
        sys.exit(problem)
    return Path(pilot.out)


def pilot_seconds(run: Path) -> float:
    """The pilot's training wall seconds up to the recipe's budget
    (:func:`validate_papers_natural.train_seconds`; for an extended run its share of the whole
    run's seconds by tokens); NaN when the run has no count."""
    seconds, step = natural.train_seconds(run), budget_step(run)
    if seconds is None:
        return float("nan")
    return seconds if step is None else seconds * step / run_meta(run)["steps"]


def heldout_documents() -> list[str]:
    """Every document of the corpus's ``heldout/`` split, in file-name order."""
    folder = natural.default_directory() / "heldout"
    files = sorted(p for p in folder.rglob("*") if p.suffix in TEXT_SUFFIXES)
    if not files:
        sys.exit(f"no held-out documents under {folder}: run `make corpus` first.")
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


@torch.inference_mode()
def heldout_perplexity(model, documents: list[str], chunk: int = 64) -> dict:
    """Mean next-token loss (and its exp) over all of ``documents`` in rows of n_ctx tokens."""
    rows = token_rows(model, documents, rows=sys.maxsize, length=model.cfg.n_ctx)
    losses = torch.cat(
        [
            token_losses(model(rows[i : i + chunk]), rows[i : i + chunk]).flatten()
            for i in range(0, len(rows), chunk)
        ]
    )
    loss = float(losses.double().mean())
    return {
        "heldout_loss": loss,
        "natural_perplexity": float(np.exp(loss)),
        "heldout_tokens": int(rows.numel()),
    }


def centrality(model, seed: int) -> dict:
    """The top head's share of the summed positive single-head harm to induction loss."""
    harm = ihprobe.head_effects(model, ["induction_loss"], seed=seed).harm("induction_loss")
    positive = harm.clamp(min=0).sum()
    top = int(harm.argmax())
    return {
        "top_head_share": float(harm.max() / positive) if positive > 0 else float("nan"),
        "top_head": f"L{top // harm.shape[1]}H{top % harm.shape[1]}",
    }


def measures(run: Path, model, seed: int, batch_size: int, context: int) -> dict:
    """This recipe's per-seed measures beside the contrast's own (module docstring)."""
    step = budget_step(run) or math.inf  # an extended run's probes up to the recipe's budget
    records = [r for r in natural.probe_records(run) if r["step"] <= step]
    live = natural.live_emergence(records, batch_size, context)
    return {**live, **centrality(model, seed), **heldout_perplexity(model, heldout_documents())}


# ----------------------------------------------------------------------------- table, claims


def values(frame: pd.DataFrame, arm: str, column: str) -> np.ndarray:
    """An arm's done seeds' finite values of ``column`` (none where the column is absent)."""
    if column not in frame:
        return np.array([])
    v = frame[(frame.arm == arm) & (frame.status == "done")][column].to_numpy(float)
    return v[np.isfinite(v)]


def tokens_cell(frame: pd.DataFrame, arm: str, column: str) -> str:
    """Mean [t 95%] in millions of tokens over the seeds that have one, and how many lack it."""
    done = int(((frame.arm == arm) & (frame.status == "done")).sum())
    found = values(frame, arm, column) / 1e6
    if not done:
        return "pending"
    text = t_mean(found).text(".3g") if len(found) else "none"
    return f"{text}; {done - len(found)} of {done} seed(s) without one"


SHOWN = {  # label -> column, mean [t 95%] over seeds
    "live max PS": "live_max_ps",
    "HITS@1 (7 tasks)": "hits@1",
    "HITS@3": "hits@3",
    "HITS@1 change, per-layer top 2% ablated": "per-layer:hits@1_change",
    "top head's share of single-head harm": "top_head_share",
    "held-out perplexity (whole split)": "natural_perplexity",
}


def table(frame: pd.DataFrame, arms) -> pd.DataFrame:
    """Emergence, ICL, centrality and held-out perplexity per arm."""
    rows = []
    for arm in arms:
        row = {
            "arm": arm,
            "emergence, change point (M tokens)": tokens_cell(frame, arm, "emergence_tokens"),
            f"first live PS >= {FORMED} (M tokens)": tokens_cell(frame, arm, "crossing_tokens"),
        }
        for label, column in SHOWN.items():
            found = values(frame, arm, column)
            row[label] = t_mean(found).text() if len(found) else "pending"
        rows.append(row)
    return pd.DataFrame(rows)


def section(frame: pd.DataFrame, arms) -> list[str]:
    """The results file's section on emergence, ICL, centrality and held-out perplexity."""
    return [
        "## Emergence, function-style ICL, centrality, held-out perplexity",
        "",
        "Emergence from each run's live probes (max PS on 20 rows of repeated random tokens at",
        "25 checkpoints): the change point of `ihprobe.dynamics.changepoint.emergence` (start of",
        f"the steepest rise of a 3-segment fit), and the first checkpoint at PS >= {FORMED}; means",
        "over the seeds that have one. HITS@1/3: the 7 built-in function-style tasks",
        "(`ihprobe.causal.tasks`; 24 prompts each, 5 shots; where the 512-id BPE spells an",
        "answer's space as a token of its own, the space is given and the next token scored),",
        "clean, and HITS@1's change when [B]'s per-layer top 2% are mean-ablated (at least one",
        "head per layer: here 1 of 4 heads in each layer). Top head's share: every head ablated",
        "alone, its harm to induction loss over the summed positive harm (1/8 spread evenly, 1",
        "one head). Perplexity: the whole held-out split.",
        "",
        *markdown(table(frame, arms)),
        "",
    ]


BI_INDUCT_ARMS = ("forward", "backward", "balanced")
CENTRAL = [above(0.0), above(0.0)]  # natural - arm: top head's share, per-layer index
HIGHER_ICL = above(0.0)  # natural - arm HITS@1


def claims(frame: pd.DataFrame) -> dict:
    """This recipe's claims of [B] in the contrast's form (arms, what, estimate, region), the
    regions declared here before the data. "More central and load-bearing" is two parts, each
    judged alone and joined by :func:`verdicts.judge_all`."""
    index = "per-layer:load_bearing_index"
    out = {}
    for arm in BI_INDUCT_ARMS:
        central = f"natural-only circuits are more central and load-bearing than Bi-Induct {arm}"
        out[f"{central} ones"] = (
            ["natural", arm],
            f"natural - {arm}: top head's share of single-head harm; [B]'s per-layer index",
            lambda arm=arm: [
                welch(values(frame, "natural", c), values(frame, arm, c))
                for c in ("top_head_share", index)
            ],
            CENTRAL,
        )
        out[f"natural-only reaches a higher function-style ICL accuracy than Bi-Induct {arm}"] = (
            ["natural", arm],
            f"HITS@1 over 7 tasks, natural - {arm}",
            lambda arm=arm: welch(values(frame, "natural", "hits@1"), values(frame, arm, "hits@1")),
            HIGHER_ICL,
        )
    return out


def settings_line(random: int | str) -> str:
    """The recipe in one paragraph, for the results file."""
    r = RECIPE
    return (
        f"Recipe `--recipe docs` (regime): the natural-text pilot `{PILOT}` of "
        f"the natural study (`lab/studies/natural`), every arm the same: GPT-NeoX 2 layers x "
        f"{r['heads']} "
        f"heads, d_model {r['d_model']} with MLPs, B = {r['batch_size']}, C = {r['context']}, "
        f"{r['tokens']:,} tokens per arm; AdamW lr {r['lr']:g} constant after a 1% warm-up, "
        f"grad clip 1; the documentation corpus's train split under its {r['vocab']}-id BPE; "
        "Bi-Induct span 20, m0 0.5 linear anneal, token mixing. The natural arm is the pilot's "
        "own runs (scored, never retrained). Perplexity and the ablations' natural loss on the "
        f"held-out split; ablation: mean, {random} random draws, index of induction loss."
    )
