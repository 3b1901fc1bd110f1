"""[B]'s contrast at matched compute, with seeds and t-intervals (issues 15 and 24).

Arms (``--list``), each one ``ihprobe.train`` run per seed under
``runs/validate-papers/contrast``: ``natural`` (natural text only, a 300-id BPE of the embedded
corpus) and Bi-Induct ``forward``, ``backward`` and ``balanced`` over the same text (snippet
span L = 20, injection rate m0 = 0.5 annealed linearly to 0, token-level mixing; snippets
replace text, so every arm sees the same tokens and the same updates).

Size and budget: 2 layers x 8 heads, d_model 64, B 8, C 128, 8,000 updates (8.2M tokens) per
arm, about 5 minutes of one core, so that 12 arm-seeds fit a session. Natural text alone
forms no induction head at this scale: the issue's example size, 4 layers x 8 heads at
d_model 128, reached max PS 0.008 after 2,000 updates (4.1M tokens), and a 2 x 8 pilot reached
0.016 after 6,000 updates at B 16 (12.3M tokens, seed 0). The embedded corpus (0.46 MB) is
small enough to memorise (training-text perplexity 3.3), but that is not the reason: trained on
a corpus 15 times larger and seen about once (``--text /usr/share/vim/vim90/doc --label vimdoc``:
Vim 9.0's help files from Debian's vim-runtime, 151 files, 9.8 MB, 7.2M tokens), the natural
arm formed none either (max PS 0.017, 3 seeds). [B]'s models have 0.13-1B parameters; ours
about 0.1M outside the embeddings. The natural arm is therefore a no-signature control here,
and [B]'s claims about it cannot be tested at this scale.
``--layers/--heads/--d-model/--batch-size/--steps`` change the setting; ``--text PATH --label
NAME`` trains every arm on another corpus, into ``contrast-NAME`` and
``RESULTS_papers_contrast-NAME.md``.

``--recipe docs`` (``contrast_docs.py``) runs the contrast in the regime where natural text
does form heads: every arm gets exactly the TrainConfig of the natural-text pilot ``d128-lr3e-3``
(2 layers x 4 heads, d_model 128 with MLPs, B 4, C 256, lr 3e-3 constant after a 1% warm-up,
30M tokens, the documentation corpus's train split under a 512-id BPE, live probes at 25
checkpoints), and the natural arm *is* that pilot's finished runs, scored without retraining.
It adds per seed: emergence from the live probes (change point, and the first PS >= 0.3), the
function-style ICL accuracy (HITS@1/3 of the built-in tasks, clean and under [B]'s per-layer
ablation), each head ablated alone (the top head's share of the harm: centrality), held-out
perplexity on the whole held-out split, and the claims "natural-only circuits are more central
and load-bearing than Bi-Induct ones" and "natural-only reaches higher function-style ICL
accuracy". Runs go to ``runs/validate-papers/contrast-docs``, results to
``RESULTS_papers_contrast-docs.md/.csv``. A Bi-Induct arm-seed trains about 35-60 minutes on
one core (as the pilot); scoring any arm-seed takes a few minutes.

Per arm and seed, on the final checkpoint:

* signature: max prefix matching (PS), and the snippet scores (``ihprobe.scan``): [B]'s
  fixed-length forward induction and anti-induction (L = 20), forward induction on snippets whose
  length varies 10-30 per row, and backward copying by what the model predicts on a reversed copy
  (:data:`SNIPPET_METRICS`, docs/science.md);
* load-bearing: the top-k prefix-matching heads ablated (mean ablation) against 20 random draws,
  k = one head per layer in total (``scope="global"``), with ``layer-matched`` and
  ``score-matched`` baselines, and [B]'s per-layer protocol (``scope="layer"``, top 2% of each
  layer); the load-bearing index of induction loss with its interval over the random draws;
* natural-text loss (clean ``natural_loss`` of the ablation, i.e. mean next-token loss on the
  embedded corpus, held-out text for an arm trained on ``--text``) and its perplexity.

The arm's table gives each number's mean over seeds with a Student-t 95% interval over seeds
(``verdicts.py``, the rules every validation script shares), and [B]'s reported direction beside
it. Each claim of [B] is judged on the interval of a difference between arms (Welch's t) or of
one arm's mean, against a region declared in :func:`verdicts` before the data; a claim resting
on an arm with fewer than 5 seeds is "pending: n of 5 seeds".

Run from the repository root (a killed run resumes; finished arms are reused)::

    nice -n 19 .venv/bin/python benchmarks/validate_papers_contrast.py --list
    nice -n 19 .venv/bin/python benchmarks/validate_papers_contrast.py --cell natural --seed 0
    nice -n 19 .venv/bin/python benchmarks/validate_papers_contrast.py            # everything
    nice -n 15 .venv/bin/python benchmarks/validate_papers_contrast.py --rescore --seed 0
    nice -n 19 .venv/bin/python benchmarks/validate_papers_contrast.py --recipe docs \
        --cell forward --seed 0

``--rescore`` adds the snippet scores to finished seeds' CSV rows, retraining (same config and
seed) a run whose folder is gone.
"""

from __future__ import annotations

import argparse
import math
import textwrap
import time
from pathlib import Path

import contrast_docs as docs
import numpy as np
import pandas as pd
from validate_papers_common import (
    ROOT,
    markdown,
    read_result,
    report_header,
    saved_results,
    status_row,
    train_or_reuse,
    write_result,
)
from verdicts import MIN_SEEDS, above, below, judge, judge_all, t_mean, welch

import ihprobe
from ihprobe.io.runs import checkpoints
from ihprobe.probes.engine import METRIC_TABLE
from ihprobe.training.trainer import TrainConfig

SEEDS = (0, 1, 2, 3, 4)
TEXT = {"vocab_size": 300}
BI_INDUCT = {**TEXT, "snippet_length": 20, "m0": 0.5, "mixing": "token"}
ARMS = {
    "natural": ("natural", TEXT),
    "forward": ("bi-induct", {**BI_INDUCT, "direction": "forward"}),
    "backward": ("bi-induct", {**BI_INDUCT, "direction": "backward"}),
    "balanced": ("bi-induct", {**BI_INDUCT, "direction": "balanced"}),
}
B_DIRECTION = {  # what [B] reports for each arm
    "natural": "central, load-bearing circuit (largest index); anti-induction ~0",
    "forward": "higher PS / forward induction than natural; distributed, redundant (lower index)",
    "backward": "anti-induction stays near 0 even though trained on; redundant circuit",
    "balanced": "distributed, redundant circuit (lower index than natural)",
}
METRICS = ("induction_loss", "ar_accuracy", "natural_loss")
PROTOCOLS = ("global-layer-matched", "global-score-matched", "per-layer")
HERE = Path(__file__).resolve().parent
OUT_MD, OUT_CSV = HERE / "RESULTS_papers_contrast.md", HERE / "RESULTS_papers_contrast.csv"


def config_of(arm: str, seed: int, args) -> TrainConfig:
    producer, options = ARMS[arm]
    if args.recipe == "docs":
        return docs.config(arm, producer, options, seed, args.out)
    corpus = {"text": args.text} if args.text else {}
    return TrainConfig(
        out=str(Path(args.out) / arm / f"seed{seed}"), producer=producer,
        producer_options={**options, **corpus}, layers=args.layers, heads=args.heads,
        d_model=args.d_model, context=args.context, batch_size=args.batch_size,
        steps=args.steps, lr=3e-3, schedule="cosine", seed=seed,
        n_checkpoints=args.checkpoints, state_every=args.state_every, progress=False,
    )  # fmt: skip


def ablations(model, scores, seed: int, random: int, text=None, tasks=False) -> dict[str, dict]:
    """Index and change of induction loss under the three protocols; natural loss on ``text``
    (default the embedded corpus); with ``tasks`` the per-layer ablation's task scores too."""
    common = {"metrics": METRICS, "random": random, "seed": seed, "text": text,
              "scores": scores.head_metric("prefix_matching")}  # fmt: skip
    k = model.cfg.n_layers  # the global set as large as the per-layer one
    per_layer = {**common, "metrics": (*METRICS, *docs.TASK_METRICS)} if tasks else common
    results = {
        "global-layer-matched": ihprobe.ablate(model, scope="global", top=k, **common),
        "global-score-matched": ihprobe.ablate(
            model, scope="global", top=k, baseline="score-matched", **common
        ),
        "per-layer": ihprobe.ablate(model, scope="layer", **per_layer),
    }
    out = {}
    for name, result in results.items():
        row = result.summary().set_index("metric").loc["induction_loss"]
        for key in ("load_bearing_index", "load_bearing_lo", "load_bearing_hi",
                    "relative_change", "random_relative_change_mean", "p_value"):  # fmt: skip
            out[f"{name}:{key}"] = float(row[key])
    natural = results["per-layer"].summary().set_index("metric").loc["natural_loss"]
    out["natural_loss"] = float(natural["clean"])
    if tasks:
        out.update(docs.task_columns(results["per-layer"].summary()))
    return out


def arm_run(arm: str, seed: int, args) -> tuple[Path, float, str]:
    """(run dir, training seconds now, how) of one arm's seed: trained, resumed or reused; the
    docs recipe's natural arm is the pilot's finished run, never trained here."""
    config = config_of(arm, seed, args)
    if args.recipe == "docs" and arm == "natural":
        return docs.pilot_run(config), 0.0, "reused"
    return train_or_reuse(config)


def run_arm(arm: str, seed: int, args) -> dict:
    """Train (or resume, or reuse) one arm's seed and measure it; the result goes to
    ``OUT/ARM/seedS/result.json`` (the run's own folder, except for a reused pilot run)."""
    run, seconds, how = arm_run(arm, seed, args)
    home = Path(args.out) / arm / f"seed{seed}"
    done = read_result(home)
    if done is not None and how == "reused":
        print(f"{arm} seed {seed}: reused (finished earlier)", flush=True)
        return done
    started = time.perf_counter()
    model = ihprobe.load(checkpoints(run)[-1].source)
    scores = ihprobe.scan(model, ["prefix_matching", *SNIPPET_METRICS], seed=seed)
    recipe = args.recipe == "docs"
    result = {
        "arm": arm, "seed": seed, "how": how, **snippet_columns(scores),
        "max_ps": float(scores.head_metric("prefix_matching").max()),
        **ablations(model, scores, seed, args.random, text=docs.heldout_documents()
                    if recipe else None, tasks=recipe),
        "train_s": (done or {}).get("train_s", 0.0) + seconds,
    }  # fmt: skip
    result["natural_perplexity"] = math.exp(result["natural_loss"])
    if recipe:  # the whole held-out split's perplexity replaces the ablation rows' one
        config = config_of(arm, seed, args)
        result.update(other_lengths(model, seed), **docs.measures(run, model, seed,
                      config.batch_size, config.context))  # fmt: skip
        if arm == "natural":
            result["train_s"] = docs.pilot_seconds(run)
    result["probe_s"] = time.perf_counter() - started
    home.mkdir(parents=True, exist_ok=True)
    write_result(home, result)
    print(f"{arm} seed {seed}: {how}, {result}", flush=True)
    return result


# the snippet scores of each seed (max over heads for a head score): [B]'s fixed-length
# protocol (forward induction, anti-induction) and the varied-length ones that tell a content
# mechanism from a fixed offset and measure backward copying by what the model predicts
SNIPPET_METRICS = ("forward_induction_fixed", "anti_induction", "forward_induction_varied",
                   "backward_duplicate", "backward_previous_token", "backward_copy_loss",
                   "backward_copy_accuracy", "backward_copy_vs_first_half",
                   "backward_copy_vs_shuffled")  # fmt: skip


def snippet_columns(scores) -> dict[str, float]:
    """``max_<score>`` of every head snippet score and the model-level ones as they are."""
    head = {f"max_{m}": float(scores.head_metric(m).max()) for m in SNIPPET_METRICS
            if m in scores.head}  # fmt: skip
    return {**head, **{m: float(v) for m, v in scores.model.items() if m in SNIPPET_METRICS}}


OTHER_LENGTHS = (15, 25)  # a head that looks 20 back scores at L = 20 only; induction at all


def other_lengths(model, seed: int) -> dict[str, float]:
    """Max fixed-length forward induction at snippet lengths other than [B]'s 20."""
    return {
        f"max_forward_induction_fixed_L{n}": float(
            ihprobe.scan(model, ["forward_induction_fixed"], seed=seed, snippet_length=n)
            .head_metric("forward_induction_fixed")
            .max()
        )
        for n in OTHER_LENGTHS
    }


def rescore(arm: str, seed: int, args) -> dict:
    """The snippet scores of one arm's seed, merged into its row of the results CSV.

    The run's final checkpoint is scored where its folder still holds it; otherwise the run is
    trained again first (the same config and seed: training is deterministic on one CPU
    thread). ``reproduced`` says whether the retrained model gives the CSV's max PS and
    anti-induction to 1e-6, so a row never mixes numbers of two different models unnoticed.
    """
    run, seconds, how = arm_run(arm, seed, args)
    started = time.perf_counter()
    model = ihprobe.load(checkpoints(run)[-1].source)
    scores = ihprobe.scan(model, ["prefix_matching", *SNIPPET_METRICS], seed=seed)
    new = {**snippet_columns(scores), **other_lengths(model, seed)}
    new["rescore_probe_s"] = time.perf_counter() - started
    if how != "reused":  # a second rescore of the same run keeps the first one's training time
        new.update(rescore_how=how, rescore_train_s=seconds)
    csv = results_files(args)[1]
    table = pd.read_csv(csv)
    at = (table.arm == arm) & (table.seed == seed)
    if at.sum() == 1:
        old = table[at].iloc[0]
        new["reproduced"] = bool(
            abs(old.max_ps - float(scores.head_metric("prefix_matching").max())) < 1e-6
            and abs(old.max_anti_induction - new["max_anti_induction"]) < 1e-6
        )
        for column, value in new.items():
            table.loc[at, column] = value
    else:  # a seed the CSV does not hold yet: its full measurement comes from run_arm
        new["reproduced"] = False
    table.to_csv(csv, index=False)
    print(f"{arm} seed {seed}: rescored ({how}), {new}", flush=True)
    return new


def collect(args) -> pd.DataFrame:
    """One row per arm and seed, status done / pending; ``args.from_csv``: the done rows of
    the results CSV instead of the run folders."""
    if getattr(args, "from_csv", False):
        saved = pd.read_csv(results_files(args)[1])
        saved = saved[saved.status == "done"].set_index(["arm", "seed"])
        return pd.DataFrame([
            status_row({"arm": arm, "seed": seed}, saved.loc[(arm, seed)].to_dict()
                       if (arm, seed) in saved.index else None)
            for arm in ARMS for seed in SEEDS
        ])  # fmt: skip
    saved = saved_results(results_files(args)[1], key=("arm", "seed"))
    rows = []
    for arm in ARMS:  # a run folder's result over the CSV's row (the record of gone folders)
        for seed in SEEDS:
            result = read_result(Path(args.out) / arm / f"seed{seed}")
            merged = {**saved.get((arm, seed), {}), **(result or {})}
            rows.append(status_row({"arm": arm, "seed": seed}, merged or None))
    return pd.DataFrame(rows)


SHOWN = {
    "max PS": "max_ps",
    "max forward induction, fixed L = 20 ([B]'s protocol)": "max_forward_induction_fixed",
    "max anti-induction": "max_anti_induction",
    "index global, layer-matched": "global-layer-matched:load_bearing_index",
    "index global, score-matched": "global-score-matched:load_bearing_index",
    "index per-layer [B]": "per-layer:load_bearing_index",
    "natural-text perplexity": "natural_perplexity",
}


def arm_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds [Student-t 95% over seeds], labelled with its seed count."""
    rows = []
    for arm, group in frame.groupby("arm", sort=False):
        done = group[group.status == "done"]
        row = {"arm": arm, "seeds done": ",".join(map(str, done.seed)) or "none"}
        for label, column in SHOWN.items():
            value = t_mean(done[column]).text() if len(done) else "pending"
            undefined = int((~np.isfinite(done[column].astype(float))).sum()) if len(done) else 0
            if undefined:  # an index is +-inf when every random draw harms exactly alike
                value += f"; {undefined} seed(s) undefined (random harms all equal), left out"
            row[label] = value
        row["[B] reports"] = B_DIRECTION[arm]
        row["train s/seed"] = f"{done.train_s.mean():.0f}" if len(done) else "-"
        rows.append(row)
    return pd.DataFrame(rows)


FORMED = METRIC_TABLE["prefix_matching"].threshold  # an attention score that counts as a head
NEEDS_HEADS = ("natural-only models", "redundant", "more central")  # claims on natural's heads


def of(frame: pd.DataFrame, arm: str, column: str) -> np.ndarray:
    """An arm's done seeds' values of ``column``."""
    return frame[(frame.arm == arm) & (frame.status == "done")][column].to_numpy(float)


def claims_of(frame: pd.DataFrame, recipe: str | None = None) -> dict:
    """Each claim of [B] -> (arms it needs, what is estimated, its estimate, the claim's region),
    the regions declared here before the data (a difference above 0; anti-induction below a
    formed head's score); ``recipe`` "docs" adds :func:`contrast_docs.claims`."""
    index = "global-layer-matched:load_bearing_index"
    claims = {  # claim -> (arms it needs, what is estimated, its estimate, the claim's region)
        "natural-only models have a central, load-bearing induction circuit": (
            ["natural"],
            "natural's global layer-matched index (0 = random)",
            lambda: t_mean(of(frame, "natural", index)),
            above(0.0),
        ),
        "Bi-Induct forward raises forward induction above natural-only": (
            ["natural", "forward"],
            "max forward induction (fixed L = 20, [B]'s protocol), forward - natural",
            lambda: welch(
                of(frame, "forward", "max_forward_induction_fixed"),
                of(frame, "natural", "max_forward_induction_fixed"),
            ),
            above(0.0),
        ),
        "anti-induction stays near zero when trained on backward snippets": (
            ["backward"],
            "backward's max anti-induction ([B]'s score, which cannot rise in a causal model)",
            lambda: t_mean(of(frame, "backward", "max_anti_induction")),
            below(FORMED),
        ),
    }
    claims.update(snippet_claims(frame))
    if recipe == "docs":
        claims.update(docs.claims(frame))
    for arm in ("forward", "balanced"):
        claims[f"Bi-Induct {arm}: a distributed, redundant circuit (index below natural's)"] = (
            ["natural", arm],
            f"index, natural - {arm}",
            lambda arm=arm: welch(of(frame, "natural", index), of(frame, arm, index)),
            above(0.0),
        )
    for arm in ("forward", "backward", "balanced"):  # needs no heads: [B] finds it at every size
        claims[f"natural-only reaches a lower natural-text perplexity than Bi-Induct {arm}"] = (
            ["natural", arm],
            f"perplexity, {arm} - natural",
            lambda arm=arm: welch(
                of(frame, arm, "natural_perplexity"), of(frame, "natural", "natural_perplexity")
            ),
            above(0.0),
        )
    return claims


def verdicts(frame: pd.DataFrame, recipe: str | None = None) -> list[tuple[str, str, str]]:
    """(claim of [B], verdict, why) for each claim of :func:`claims_of`: the interval of a
    difference between arms (Welch's t) or of one arm's mean (t) against the claim's region; a
    claim of several parts (lists) judged part by part and joined by ``judge_all``."""
    started = {arm: len(of(frame, arm, "max_ps")) > 0 for arm in ARMS}
    natural_ps = t_mean(of(frame, "natural", "max_ps"))
    no_heads = started["natural"] and natural_ps.high < FORMED
    out = []
    for claim, (needs, what, estimate, region) in claims_of(frame, recipe).items():
        waiting = [arm for arm in needs if not started[arm]]
        if waiting:
            why = f"arm(s) {', '.join(waiting)}: no seed done"
            out.append((claim, f"pending: 0 of {MIN_SEEDS} seeds", why))
            continue
        if isinstance(region, list):
            verdict, why = judge_all([judge(*p) for p in zip(estimate(), region, strict=True)])
        else:
            verdict, why = judge(estimate(), region)
        why = f"{what}: {why}"
        if no_heads and any(word in claim for word in NEEDS_HEADS):
            if not verdict.startswith("pending"):
                verdict = "inconclusive at this scale"
            why = (
                f"no induction head formed from natural text (max PS {natural_ps.text('.2g')}, "
                f"below {FORMED}): nothing to compare"
            )
        out.append((claim, verdict, why))
    return out  # fmt: skip


def scored(frame: pd.DataFrame, arm: str, column: str) -> np.ndarray:
    """An arm's done seeds' finite values of ``column`` (none where no seed was rescored)."""
    return of(frame, arm, column)[np.isfinite(of(frame, arm, column))] if column in frame else []


def snippet_claims(frame: pd.DataFrame) -> dict:
    """What the varied-length and behavioural snippet scores (issue 25) say, in
    :func:`verdicts`' form, regions declared before the data: forward induction above
    natural-only where no single offset fits, and backward copying learned (the reversed copy
    predicted better than a shuffled copy of the same tokens)."""
    return {
        "(issue 25) Bi-Induct forward's forward induction is a content match: above "
        "natural-only on varied snippet lengths": (
            ["natural", "forward"],
            "max forward induction (varied L 10-30), forward - natural",
            lambda: welch(scored(frame, "forward", "max_forward_induction_varied"),
                          scored(frame, "natural", "max_forward_induction_varied")),
            above(0.0),
        ),
        "(issue 25) trained on backward snippets, the model copies backward": (
            ["backward"],
            "backward's loss on a shuffled copy minus on the reversed copy (nats)",
            lambda: t_mean(scored(frame, "backward", "backward_copy_vs_shuffled")),
            above(0.0),
        ),
    }  # fmt: skip


SNIPPET_SHOWN = {  # issue 25; [B]'s fixed-length scores are in the arm table
    "max forward induction, varied L 10-30": "max_forward_induction_varied",
    "max forward induction, fixed L = 15": "max_forward_induction_fixed_L15",
    "max forward induction, fixed L = 25": "max_forward_induction_fixed_L25",
    "max backward duplicate (varied)": "max_backward_duplicate",
    "max backward previous-token (varied)": "max_backward_previous_token",
    "backward copy accuracy (varied)": "backward_copy_accuracy",
    "backward copy loss (nats)": "backward_copy_loss",
    "shuffled minus reversed copy loss (nats)": "backward_copy_vs_shuffled",
    "first half minus reversed copy loss (nats)": "backward_copy_vs_first_half",
}


def snippet_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The varied-length and behavioural snippet scores: mean [t 95%] over the seeds rescored
    so far (each cell names its seed count)."""
    rows = []
    for arm in ARMS:
        wall = frame.get("rescore_train_s", pd.Series(np.nan, index=frame.index))
        done = (frame.arm == arm) & wall.notna()
        walls = zip(frame.seed[done], wall[done], strict=True)
        retrained = ", ".join(f"{seed} ({seconds:.0f} s)" for seed, seconds in walls) or "none"
        row = {"arm": arm, "seeds rescored (retraining wall time, one core)": retrained}
        for label, column in SNIPPET_SHOWN.items():
            values = scored(frame, arm, column)
            row[label] = t_mean(values).text() if len(values) else "not rescored yet"
        rows.append(row)
    return pd.DataFrame(rows)


TITLE = "[B]'s contrast at matched compute, with seeds (issue 15)"


def suffix(args) -> str:
    """``-LABEL`` for a run on another corpus (``--text``), else empty: one run folder and one
    pair of results files per corpus."""
    return f"-{args.label}" if args.label else ""


def results_files(args) -> tuple[Path, Path]:
    """``RESULTS_papers_contrast[-LABEL].md`` and ``.csv``."""
    return (HERE / f"{OUT_MD.stem}{suffix(args)}.md", HERE / f"{OUT_CSV.stem}{suffix(args)}.csv")


def snippet_note(vocab: int, heads: int) -> list[str]:
    """What the snippet table shows, with chance for a ``vocab``-id model of ``heads`` heads."""
    chance = {
        m: METRIC_TABLE[m].chance(vocab, 20)
        for m in ("forward_induction_varied", "backward_duplicate", "backward_previous_token")
    }
    text = (
        "[B]'s forward induction and anti-induction above use snippets of one length (L = 20), "
        "so a head that looks 20 tokens back scores 1 on forward induction, and [B]'s "
        "anti-induction reads a key that no causal head can find by content (docs/science.md). "
        "Below: forward induction on snippets whose length L varies 10-30 per row, and backward "
        "copying measured by what the model predicts on the reversed copy (accuracy, loss, and "
        "the loss of a shuffled copy and of the first half minus it), with the attention of the "
        "circuit that does it (the copy's s_k to its earlier occurrence; the previous-token head "
        "there). A run whose folder is gone is retrained (same config and seed) and rescored "
        "with `--rescore`; `reproduced` in the CSV says whether it gave the CSV's max PS and "
        "anti-induction again. Chance (a head attending uniformly; a max over "
        f"{heads} heads sits a little above it): forward induction "
        f"{chance['forward_induction_varied']:.3f}, backward duplicate "
        f"{chance['backward_duplicate']:.3f}, previous-token "
        f"{chance['backward_previous_token']:.2f}; copy accuracy 1/{vocab}, copy loss ln {vocab} "
        f"= {math.log(vocab):.1f} nats for a uniform guess (a model of natural text is "
        "confidently wrong on random tokens, so its losses run higher), the two differences 0."
    )
    return [
        "## Snippet scores that tell mechanisms apart (issue 25)",
        "",
        *textwrap.wrap(text, 95, break_on_hyphens=False),
    ]


def settings(args) -> str:
    """The setting of the default recipe (or ``--text``) in one paragraph."""
    return (
        f"Settings: GPT-NeoX {args.layers} layers x {args.heads} heads, d_model {args.d_model}, "
        f"B = {args.batch_size}, C = {args.context}, {args.steps} updates per arm "
        f"({args.steps * args.batch_size * args.context:,} tokens, the same for every arm); "
        "AdamW lr 3e-3, cosine, grad clip 1; Bi-Induct span 20, m0 0.5 linear anneal, "
        f"token mixing; corpus: {args.text or 'the embedded one'} (300-id BPE on it); "
        f"seeds {', '.join(map(str, SEEDS))}; perplexity on the embedded corpus; ablation: mean, "
        f"{args.random} random draws, index of induction loss."
    )


def report(args) -> None:
    frame = collect(args)
    out_md, out_csv = results_files(args)
    unit = f"--text {args.text} --label {args.label} --seed SEED" if args.text else "--seed SEED"
    recipe = args.recipe == "docs"
    if recipe:
        unit = "--recipe docs --cell ARM --seed SEED"
    frame.to_csv(out_csv, index=False)
    lines = [
        *report_header(TITLE + (", on the natural-text recipe (issue 23)" if recipe else ""),
                       "validate_papers_contrast.py", unit, frame),
        docs.settings_line(args.random) if recipe else settings(args), "",
        "Each cell: mean over seeds [Student-t 95% interval over seeds] (`benchmarks/verdicts.py`)",
        f"with its seed count; a claim on an arm with fewer than {MIN_SEEDS} seeds is pending.",
        f"Per-seed rows (with each index's interval over the random draws and the wall times): "
        f"`{out_csv.name}`.", "",
        *markdown(arm_table(frame)), "", *(docs.section(frame, ARMS) if recipe else []),
        *snippet_note(*((docs.RECIPE["vocab"], 8) if recipe else (300, 16))), "",
        *markdown(snippet_table(frame)), "", "## [B]'s claims at this scale", "",
        "Each claim's region is declared in the script before the data (a difference between",
        "arms above 0, Welch's t; anti-induction below a formed head's score): 'agrees' when the",
        "whole 95% interval lies inside it, 'disagrees' when wholly outside, else inconclusive;",
        f"a head counts as formed at an attention score of {FORMED}.", "",
        *markdown(pd.DataFrame(verdicts(frame, args.recipe),
                               columns=["[B]'s claim", "here", "why"])), "",
    ]  # fmt: skip
    out_md.write_text("\n".join(lines))
    print(f"wrote {out_md.name} and {out_csv.name}")


# the default recipe's model, budget and checkpoints (--recipe docs takes the pilot's)
SHAPE = {"layers": 2, "heads": 8, "d_model": 64, "context": 128, "batch_size": 8, "steps": 8000,
         "checkpoints": 10, "state_every": 100}  # fmt: skip


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked, with the recipe's defaults and run folder filled in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", choices=list(ARMS), help="only this arm")
    parser.add_argument("--seed", type=int, action="append", help="only this seed")
    parser.add_argument("--list", action="store_true", help="list the arms and their status")
    parser.add_argument("--report", action="store_true", help="only rewrite the results files")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="only add the snippet scores to the results CSV (retraining a run that is gone)",
    )
    parser.add_argument(
        "--from-csv", action="store_true", help="with --report: rebuild from the results CSV"
    )
    parser.add_argument(
        "--recipe",
        choices=["docs"],
        help="docs: every arm on the natural-text pilot d128-lr3e-3's config and corpus "
        "(contrast_docs.py); the natural arm is the pilot's runs, scored, never retrained",
    )
    for name in SHAPE:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default {SHAPE[name]}")
    parser.add_argument("--random", type=int, default=20, help="random baseline draws")
    parser.add_argument(
        "--text",
        help="train every arm on this corpus (file, folder or glob) "
        "instead of the embedded one; needs --label",
    )
    parser.add_argument("--label", help="names the corpus in the run folder and results files")
    parser.add_argument("--out", help="run folder (default runs/validate-papers/contrast[-LABEL])")
    args = parser.parse_args(argv)
    given = [f"--{name.replace('_', '-')}" for name in SHAPE if getattr(args, name) is not None]
    if args.recipe == "docs":
        if given or args.text or args.label:
            parser.error(
                "--recipe docs takes the pilot's model, budget and corpus: drop "
                f"{', '.join(given + ['--text/--label'] * bool(args.text or args.label))}"
            )
        args.label = "docs"
    elif bool(args.text) != bool(args.label):
        parser.error("--text and --label go together: name the corpus you train on")
    for name, default in SHAPE.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    args.out = args.out or str(ROOT / "runs" / "validate-papers" / f"contrast{suffix(args)}")
    if args.from_csv and not args.report:
        parser.error("--from-csv only rebuilds the tables: pass it with --report")
    return args


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    if args.list:
        print(collect(args)[["arm", "seed", "status"]].to_string(index=False))
        return
    if args.rescore:
        for arm in args.cell or ARMS:
            for seed in args.seed or SEEDS:
                rescore(arm, seed, args)
        return
    jobs = [] if args.report else [(a, s) for a in args.cell or ARMS for s in args.seed or SEEDS]
    for arm, seed in jobs:
        docs_natural = args.recipe == "docs" and arm == "natural"
        waiting = docs.pilot_problem(config_of(arm, seed, args)) if docs_natural else ""
        if waiting and len(jobs) > 1:  # one arm-seed asked for: run_arm says why and exits
            print(f"skipped: {waiting}", flush=True)
            continue
        run_arm(arm, seed, args)
    report(args)


if __name__ == "__main__":
    main()
