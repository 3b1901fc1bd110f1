"""[B]'s contrast at matched compute, with seeds and t-intervals (issues 15 and 24).

Arms (``--list``), each one ``ihprobe.train`` run per seed under
``runs/validate-papers/contrast``: ``natural`` (natural text only, a 300-id BPE of the embedded
corpus) and Bi-Induct ``forward``, ``backward`` and ``balanced`` over the same text (snippet
span L = 20, injection rate m0 = 0.5 annealed linearly to 0, token-level mixing; snippets
replace text, so every arm sees the same tokens and the same updates).

Size and budget: 2 layers x 8 heads, d_model 64, B 8, C 128, 8,000 updates (8.2M tokens) per arm,
about 5 minutes of one core, so that 12 arm-seeds fit a session. Natural text alone forms no
induction head at this scale: the issue's example size, 4 layers x 8 heads at d_model 128, reached
max PS 0.008 after 2,000 updates (4.1M tokens), and a 2 x 8 pilot reached 0.016 after 6,000 updates
at B 16 (12.3M tokens, seed 0). The embedded corpus (0.46 MB) is small enough to memorise
(training-text perplexity 3.3), but that is not the reason: trained on a corpus 15 times larger and
seen about once (``--text /usr/share/vim/vim90/doc --label vimdoc``: Vim 9.0's help files from
Debian's vim-runtime, 151 files, 9.8 MB, 7.2M tokens), the natural arm formed none either (max PS
0.017, 3 seeds). [B]'s models have 0.13-1B parameters; ours about 0.1M outside the embeddings. The
natural arm is therefore a no-signature control here, and [B]'s claims about it cannot be tested at
this scale. ``--layers/--heads/--d-model/--batch-size/--steps`` change the setting; ``--text PATH
--label NAME`` trains every arm on another corpus, into ``contrast-NAME`` and
``RESULTS_papers_contrast-NAME.md``.

``--recipe docs`` (``lab/studies/contrast/docs.py``) runs the contrast in the regime where natural
text does form heads: every arm gets exactly the TrainConfig of the natural-text pilot
``d128-lr3e-3`` (2 layers x 4 heads, d_model 128 with MLPs, B 4, C 256, lr 3e-3 constant after a 1%
warm-up, 30M tokens, the documentation corpus's train split under a 512-id BPE, live probes at 25
checkpoints), and the natural arm *is* that pilot's finished runs, scored without retraining. It
adds per seed: emergence from the live probes (change point, and the first PS >= 0.3), the
function-style ICL accuracy (HITS@1/3 of the built-in tasks, clean and under [B]'s per-layer
ablation), each head ablated alone (the top head's share of the harm: centrality), held-out
perplexity on the whole held-out split, and the claims "natural-only circuits are more central and
load-bearing than Bi-Induct ones" and "natural-only reaches higher function-style ICL accuracy".
Runs go to ``runs/validate-papers/contrast-docs``, results to
``RESULTS_papers_contrast-docs.md/.csv``. A Bi-Induct arm-seed trains about 35-60 minutes on one
core (as the pilot); scoring any arm-seed takes a few minutes.

Per arm and seed, on the final checkpoint:

* signature: max prefix matching (PS), and the snippet scores (``ihprobe.scan``): [B]'s
  fixed-length forward induction and anti-induction (L = 20), forward induction on snippets whose
  length varies 10-30 per row, and backward copying by what the model predicts on a reversed copy
  (``lab/studies/contrast/snippets.py``, docs/science.md);
* load-bearing: the top-k prefix-matching heads ablated (mean ablation) against 20 random draws,
  k = one head per layer in total (``scope="global"``), with ``layer-matched`` and
  ``score-matched`` baselines, and [B]'s per-layer protocol (``scope="layer"``, top 2% of each
  layer); the load-bearing index of induction loss with its interval over the random draws;
* natural-text loss (clean ``natural_loss`` of the ablation, i.e. mean next-token loss on the
  embedded corpus, also for an arm trained on ``--text``) and its perplexity; the docs recipe
  replaces it with the held-out split's perplexity.

The arm's table gives each number's mean over seeds with a Student-t 95% interval over seeds
(``ihprobe/dynamics/verdicts.py``, the rules every validation script shares), and [B]'s reported
direction beside it. Each claim of [B] is judged on the interval of a difference between arms
(Welch's t) or of one arm's mean, against a region declared in ``lab/studies/contrast/claims.py``
before the data; a claim resting on an arm with fewer than 5 seeds is "pending: n of 5 seeds". Post
hoc (issue 43): a claim about heads is judged only over the seeds that have an induction head by the
recorded-column proxy of ``heads.py``, and the induction-loss rise (not [B]'s scale, which is the
relative drop in ICL task accuracy: ``task_drop.py``) is reported beside the index.

Run from the repository root (a killed run resumes; finished arms are reused)::

    nice -n 19 .venv/bin/python -m lab.studies contrast --list
    nice -n 19 .venv/bin/python -m lab.studies contrast --cell natural --seed 0
    nice -n 19 .venv/bin/python -m lab.studies contrast            # everything
    nice -n 15 .venv/bin/python -m lab.studies contrast --rescore --seed 0
    nice -n 19 .venv/bin/python -m lab.studies contrast --recipe docs \
        --cell forward --seed 0

``--rescore`` adds the snippet scores to finished seeds' CSV rows, retraining (same config and
seed) a run whose folder is gone (``contrast_snippets.rescore``).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import pandas as pd

import ihprobe
from ihprobe import TrainConfig
from ihprobe.dynamics.verdicts import MIN_SEEDS, family_note
from ihprobe.jobs.grid import (
    markdown,
    read_result,
    results_pair,
    saved_results,
    status_row,
    train_or_reuse,
    write_record,
    write_result,
)
from lab.studies.cli import OneLineParser, positive_int
from lab.studies.contrast import docs, heads, task_drop
from lab.studies.contrast.cells import ARMS, SEEDS, SHAPE
from lab.studies.contrast.claims import FORMED, arm_table, verdicts
from lab.studies.contrast.measure import ablations, draws
from lab.studies.contrast.snippets import (
    SNIPPET_METRICS,
    other_lengths,
    rescore,
    snippet_columns,
    snippet_note,
    snippet_table,
)
from lab.studies.study import ROOT, header

HERE = Path(__file__).resolve().parent
OUT_MD, OUT_CSV = HERE / "RESULTS_papers_contrast.md", HERE / "RESULTS_papers_contrast.csv"


def config_of(arm: str, seed: int, args) -> TrainConfig:
    producer, options = ARMS[arm]
    if args.recipe == "docs":
        return docs.config(arm, producer, options, seed, args.out)
    corpus = {"text": args.text} if args.text else {}
    return TrainConfig(
        out=str(Path(args.out) / arm / f"seed{seed}"),
        producer=producer,
        producer_options={**options, **corpus},
        layers=args.layers,
        heads=args.heads,
        d_model=args.d_model,
        context=args.context,
        batch_size=args.batch_size,
        steps=args.steps,
        lr=3e-3,
        schedule="cosine",
        seed=seed,
        n_checkpoints=args.checkpoints,
        state_every=args.state_every,
        progress=False,
    )


def arm_run(arm: str, seed: int, args) -> tuple[Path, float, str]:
    """(run dir, training seconds now, how) of one arm's seed: trained, resumed or reused; the
    docs recipe's natural arm is the pilot's finished run, never trained here."""
    config = config_of(arm, seed, args)
    if args.recipe == "docs" and arm == "natural":
        return docs.pilot_run(config), 0.0, "reused"
    return train_or_reuse(config)


def run_arm(arm: str, seed: int, args) -> dict:
    """Train (or resume, or reuse) one arm's seed and measure it; the result goes to
    ``OUT/ARM/seedS/result.json`` (the run's own folder, except for a reused pilot run); a
    seed whose folder is gone is read from the results CSV, not retrained."""
    home = Path(args.out) / arm / f"seed{seed}"
    saved = saved_results(results_files(args)[1], key=("arm", "seed")).get((arm, seed))
    if read_result(home) is None and saved is not None:
        print(f"{arm} seed {seed}: reused (in the results CSV; its folder is gone)", flush=True)
        return saved
    run, seconds, how = arm_run(arm, seed, args)
    done = read_result(home)
    if done is not None and how == "reused":
        print(f"{arm} seed {seed}: reused (finished earlier)", flush=True)
        return done
    started = time.perf_counter()
    model = ihprobe.load(docs.scored_checkpoint(run).source)
    scores = ihprobe.scan(model, ["prefix_matching", *SNIPPET_METRICS], seed=seed)
    recipe = args.recipe == "docs"
    result = {
        "arm": arm,
        "seed": seed,
        "how": how,
        **snippet_columns(scores),
        "max_ps": float(scores.head_metric("prefix_matching").max()),
        **ablations(
            model,
            scores,
            seed,
            args.random,
            text=docs.heldout_documents() if recipe else None,
            tasks=recipe,
        ),
        "train_s": (done or {}).get("train_s", 0.0) + seconds,
        "random_draws": args.random,  # this row's own provenance, whatever a later run passes
    }
    result["natural_perplexity"] = math.exp(result["natural_loss"])
    result.update(other_lengths(model, seed))  # as --rescore adds to the older seeds' rows
    if recipe:  # the whole held-out split's perplexity replaces the ablation rows' one
        config = config_of(arm, seed, args)
        result.update(docs.measures(run, model, seed, config.batch_size, config.context))
        if arm == "natural":
            result["train_s"] = docs.pilot_seconds(run)
    result["probe_s"] = time.perf_counter() - started
    home.mkdir(parents=True, exist_ok=True)
    write_result(home, result)
    print(f"{arm} seed {seed}: {how}, {result}", flush=True)
    return result


def collect(args) -> pd.DataFrame:
    """One row per arm and seed, status done / pending; ``args.from_csv``: the done rows of
    the results CSV instead of the run folders."""
    if getattr(args, "from_csv", False):
        saved = pd.read_csv(results_files(args)[1])
        saved = saved[saved.status == "done"].set_index(["arm", "seed"])
        return pd.DataFrame(
            [
                status_row(
                    {"arm": arm, "seed": seed},
                    saved.loc[(arm, seed)].to_dict() if (arm, seed) in saved.index else None,
                )
                for arm in ARMS
                for seed in SEEDS
            ]
        )
    saved = saved_results(results_files(args)[1], key=("arm", "seed"))
    rows = []
    for arm in ARMS:  # a run folder's result over the CSV's row (the record of gone folders)
        for seed in SEEDS:
            result = read_result(Path(args.out) / arm / f"seed{seed}")
            merged = {**saved.get((arm, seed), {}), **(result or {})}
            rows.append(status_row({"arm": arm, "seed": seed}, merged or None))
    return pd.DataFrame(rows)


TITLE = "[B]'s contrast at matched compute, with seeds (issue 15)"


def suffix(args) -> str:
    """``-LABEL`` for a run on another corpus (``--text``), else empty: one run folder and one
    pair of results files per corpus."""
    return f"-{args.label}" if args.label else ""


def default_out(args) -> Path:
    """``runs/validate-papers/contrast[-LABEL]``."""
    return ROOT / "runs" / "validate-papers" / f"contrast{suffix(args)}"


def results_files(args) -> tuple[Path, Path]:
    """``RESULTS_papers_contrast[-LABEL].md`` and ``.csv`` of ``args.out`` (``results_pair``)."""
    md, csv = HERE / f"{OUT_MD.stem}{suffix(args)}.md", HERE / f"{OUT_CSV.stem}{suffix(args)}.csv"
    return results_pair(md, csv, args.out, default_out(args))


def settings(args, random: str) -> str:
    """The setting of the default recipe (or ``--text``) in one paragraph."""
    return (
        f"Settings: GPT-NeoX {args.layers} layers x {args.heads} heads, d_model {args.d_model}, "
        f"B = {args.batch_size}, C = {args.context}, {args.steps} updates per arm "
        f"({args.steps * args.batch_size * args.context:,} tokens, the same for every arm); "
        "AdamW lr 3e-3, cosine, grad clip 1; Bi-Induct span 20, m0 0.5 linear anneal, "
        f"token mixing; corpus: {args.text or 'the embedded one'} (300-id BPE on it); "
        f"seeds {', '.join(map(str, SEEDS))}; perplexity on the embedded corpus; ablation: mean, "
        f"{random} random draws, index of induction loss."
    )


def report(args, rerender: bool | None = None) -> None:
    """Write the results files; ``rerender`` (``--report``, or a run that measured nothing new):
    the recorded provenance lines stay, and every number keeps the draws its row records."""
    rerender = args.report if rerender is None else rerender
    frame = collect(args)
    out_md, out_csv = results_files(args)
    random = draws(frame[frame.status == "done"], out_md, None if rerender else args.random)
    unit = f"--text {args.text} --label {args.label} --seed SEED" if args.text else "--seed SEED"
    recipe = args.recipe == "docs"
    if recipe:
        unit = "--recipe docs --cell ARM --seed SEED"
    judged = pd.DataFrame(verdicts(frame, args.recipe), columns=["[B]'s claim", "here", "why"])
    shape = config_of("natural", SEEDS[0], args)  # every arm's model has this shape
    lines = [
        *header(
            "contrast",
            TITLE + (", on the natural-text recipe (issue 23)" if recipe else ""),
            unit,
            frame,
            out_md,
            rerender,
        ),
        docs.settings_line(random) if recipe else settings(args, random),
        "",
        "Each cell: mean over seeds [Student-t 95% interval over seeds] "
        "(`ihprobe/dynamics/verdicts.py`)",
        f"with its seed count; a claim on an arm with fewer than {MIN_SEEDS} seeds is pending.",
        f"Per-seed rows (with each index's interval over the random draws and the wall times): "
        f"`{out_csv.name}`.",
        "",
        *markdown(arm_table(frame)),
        "",
        *(docs.section(frame, ARMS) if recipe else []),
        *snippet_note(*((docs.RECIPE["vocab"], 8) if recipe else (300, 16))),
        "",
        *markdown(snippet_table(frame)),
        "",
        "## [B]'s claims at this scale",
        "",
        "Each claim's region is declared in the script before the data (a difference between",
        "arms above 0, Welch's t; anti-induction below a formed head's score): 'agrees' when the",
        "whole 95% interval lies inside it, 'disagrees' when wholly outside, else inconclusive;",
        f"a head counts as formed at an attention score of {FORMED}. Post hoc (issue 43): a claim",
        "about heads is judged only over the seeds that have a head (the section below).",
        "",
        *markdown(judged),
        "",
        family_note(len(judged)),
        "",
        *heads.section(frame, ARMS, (shape.layers, shape.heads)),
        *(task_drop.section(frame, ARMS) if recipe else []),
    ]
    write_record(out_csv, frame, out_md, "\n".join(lines))  # each atomically
    print(f"wrote {out_md.name} and {out_csv.name}")


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked, with the recipe's defaults and run folder filled in."""
    parser = OneLineParser(
        prog="python -m lab.studies contrast", description=__doc__.splitlines()[0]
    )
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
    parser.add_argument("--task-floor", action="store_true", help=task_drop.FLOOR_HELP)
    parser.add_argument(
        "--recipe",
        choices=["docs"],
        help="docs: every arm on the natural-text pilot d128-lr3e-3's config and corpus "
        "(lab/studies/contrast/docs.py); the natural arm is the pilot's runs, scored, never "
        "retrained",
    )
    for name in SHAPE:
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=positive_int, help=f"default {SHAPE[name]}"
        )
    parser.add_argument("--random", type=positive_int, default=20, help="random baseline draws")
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
    args.out = args.out or str(default_out(args))
    if args.task_floor and args.recipe != "docs":
        parser.error("--task-floor scores the docs recipe's reference model: add --recipe docs")
    args.report = args.report or args.task_floor  # the floor measured, the files rewritten
    if args.from_csv and not args.report:
        parser.error("--from-csv only rebuilds the tables: pass it with --report")
    return args


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    if args.list:
        print(collect(args)[["arm", "seed", "status"]].to_string(index=False))
        return
    if args.task_floor:
        task_drop.write_floor()
    if args.rescore:
        for arm in args.cell or ARMS:
            for seed in args.seed or SEEDS:
                rescore(arm, seed, arm_run(arm, seed, args), results_files(args)[1])
        return
    jobs = [] if args.report else [(a, s) for a in args.cell or ARMS for s in args.seed or SEEDS]
    saved = saved_results(results_files(args)[1], key=("arm", "seed"))
    fresh = [
        (arm, seed)
        for arm, seed in jobs
        if read_result(Path(args.out) / arm / f"seed{seed}") is None and (arm, seed) not in saved
    ]
    for arm, seed in jobs:
        docs_natural = args.recipe == "docs" and arm == "natural"
        waiting = docs.pilot_problem(config_of(arm, seed, args)) if docs_natural else ""
        if waiting and len(jobs) > 1:  # one arm-seed asked for: run_arm says why and exits
            print(f"skipped: {waiting}", flush=True)
            continue
        run_arm(arm, seed, args)
    report(args, rerender=args.report or not fresh)  # nothing measured here: a re-render


if __name__ == "__main__":
    main()
