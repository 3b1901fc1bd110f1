"""The main job: train a tiny model, watch its induction heads emerge, test whether it needs them.

``ihprobe demo`` (``make demo``) runs the whole toolkit end to end on CPU in about a minute:

1. train a 2-layer GPT-NeoX on random tokens that repeat from a random position with a random
   period (content-based induction is the only way to predict them), with checkpoints;
2. scan every checkpoint (prefix matching, AR accuracy, ...) into one trajectory table;
3. find the emergence point and put the law's prediction beside it;
4. ablate the top 3 prefix-matching heads of the final checkpoint against 20 layer-matched
   and 20 score-matched random draws, every head alone, and [B]'s per-layer top 2% for
   reference;
5. write ``report.html`` and the CSVs.

``compare=True`` also trains a Bi-Induct variant at matched compute ([B]'s comparison).

>>> result = run_demo(DemoConfig(out="runs/demo"))       # doctest: +SKIP
>>> result.report                                         # doctest: +SKIP
PosixPath('runs/demo/report.html')
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd
import torch

import ihprobe
from ihprobe.causal.ablation import check_settings
from ihprobe.causal.results import AblationResult, HeadEffects
from ihprobe.circuit.positions import loss_by_position_over_run
from ihprobe.core.files import atomic_write, check_writable_dir
from ihprobe.core.stages import STAGE
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.dynamics.changepoint import EmergencePoint, emergence
from ihprobe.dynamics.law import Prediction, predict_emergence
from ihprobe.dynamics.trajectories import trajectory
from ihprobe.figures.demo_report import write_demo_report
from ihprobe.figures.demo_text import THRESHOLD, compare_note
from ihprobe.io.provenance import csv_table
from ihprobe.io.runs import checkpoints, config_changes, is_finished, losses
from ihprobe.probes.engine import METRIC_TABLE
from ihprobe.probes.inputs import default_n
from ihprobe.probes.scores import HeadScores
from ihprobe.training.config import TrainConfig, check_config
from ihprobe.training.trainer import train

log = logging.getLogger(__name__)

# Metrics the demo follows over training (one cheap scan per checkpoint).
TRAJECTORY_METRICS = (
    "prefix_matching", "previous_token", "duplicate_token", "forward_induction_varied",
    "anti_induction", "ar_accuracy", "induction_loss",
)  # fmt: skip
ABLATION_METRICS = ("ar_accuracy", "induction_loss", "ar_mean_rank")


@dataclass(frozen=True)
class DemoConfig:
    """What the demo trains and how it probes it. The defaults finish in about a minute and
    a half on 2 cores (benchmarks/bench_demo.py); heads form after a few hundred updates.

    Random tokens are the background because only copying can predict them: a tiny model
    forms its induction heads within a few hundred updates, where over natural text it first
    spends thousands learning bigrams (measured: no heads after 600 updates).
    """

    out: str = "runs/demo"  # output directory: runs, CSVs and report.html
    producer: str = "repeats"  # rows that turn periodic at a random point (README)
    producer_options: dict = field(
        default_factory=lambda: {
            "base": "iid",  # uniform random tokens before and inside the repeats
            "vocab_size": 64,
            "period": (4, 16),  # period drawn per row: no fixed offset solves the repeats
            "start": (0, 4),  # where a row turns periodic, drawn per row
        }
    )
    layers: int = 2  # Elhage et al.: induction needs two layers (composition)
    # ten heads per layer (of 8 dimensions): a top set of 3 in layer 1 leaves C(7, 3) = 35
    # distinct layer-matched sets, enough for a permutation p-value to reach 1/20 (with 4
    # heads per layer only 3 sets existed, so p could not go below 1/4)
    heads: int = 10
    d_model: int = 80
    d_mlp: int | None = None  # 4 * d_model; 0: attention-only
    context: int = 64  # C
    batch_size: int = 32  # B
    steps: int = 500  # updates
    lr: float = 3e-3
    schedule: str = "constant"  # a cosine decay slows the transition past the end of the run
    checkpoints: str = "linear"  # the transition is late in a short run: resolve it evenly
    n_checkpoints: int = 20  # plus step 0
    top: int = 3  # the top set: the model's 3 highest prefix-matching heads
    random: int = 20  # random draws of the ablation baseline
    seed: int = 0
    compare: bool = False  # also train a Bi-Induct variant (balanced directions) for [B]
    progress: bool = True  # tqdm bars, on a terminal only (as the trainer's)
    # intra-op threads: a d_model-64 model gains nothing from more, and on shared cores the
    # extra threads spin-wait (ihprobe.core.threads, benchmarks/bench_threads.py)
    threads: int = DEFAULT_THREADS


@dataclass
class Study:
    """Everything the demo found about one run, as the report draws it."""

    run: Path
    producer: str
    options: dict
    table: pd.DataFrame  # trajectory of TRAJECTORY_METRICS over every checkpoint
    losses: pd.DataFrame  # training loss (ihprobe.io.runs.losses)
    point: EmergencePoint  # prefix matching
    ar_point: EmergencePoint  # AR accuracy
    prediction: Prediction  # the law's, for the run's B and C
    model: torch.nn.Module  # the final checkpoint, loaded
    scores: HeadScores  # of the final checkpoint
    ablation: AblationResult  # global top-k vs layer-matched draws (summary.csv's numbers)
    ablations: dict[str, AblationResult]  # layer-matched, score-matched, per-layer
    effects: HeadEffects  # every head ablated alone
    positions: pd.DataFrame  # loss by token position at every checkpoint
    summary: dict  # the run's row of summary.csv


@dataclass
class DemoResult:
    """Paths the demo wrote and the numbers it found, per run."""

    report: Path
    runs: dict[str, Path]
    tables: dict[str, Path]
    summary: pd.DataFrame


def variants(config: DemoConfig) -> dict[str, tuple[str, dict]]:
    """Run name -> (producer, options). With ``compare``, [B]'s natural vs Bi-Induct pair."""
    runs = {"main": (config.producer, dict(config.producer_options))}
    if config.compare:
        base = {"vocab_size": 300}  # a small byte-level BPE of the embedded corpus
        runs["natural"] = ("natural", base)
        runs["bi-induct"] = ("bi-induct", {**base, "direction": "balanced"})
    return runs


def run_demo(config: DemoConfig = DemoConfig()) -> DemoResult:
    """Train, scan, find the emergence point, ablate, and write the report (see module doc).

    Every setting is checked before anything trains.
    """
    out = check_writable_dir(config.out)
    check_settings(top=0.02, random=config.random, mode="mean")
    for name, (producer, options) in variants(config).items():
        check_config(_train_config(config, out / name, producer, options))
    out.mkdir(parents=True, exist_ok=True)
    with torch_threads(config.threads):
        studies = {
            name: _study(config, name, producer, options)
            for name, (producer, options) in variants(config).items()
        }
    tables = {}
    for name, study in studies.items():
        tables[f"{name}/trajectory"] = _csv(csv_table(study.table), out / f"{name}-trajectory.csv")
        ablation = csv_table(study.ablation.to_frame())  # statistic in its own column
        tables[f"{name}/ablation"] = _csv(ablation, out / f"{name}-ablation.csv")
    summary = pd.DataFrame([study.summary for study in studies.values()])
    tables["summary"] = _csv(summary, out / "summary.csv")
    report = write_demo_report(out / "report.html", config, studies, summary)
    return DemoResult(
        report=report, runs={n: s.run for n, s in studies.items()}, tables=tables, summary=summary
    )


def _study(config: DemoConfig, name: str, producer: str, options: dict) -> Study:
    """One run: train (or reuse a finished run), trajectory, emergence, law, ablation."""
    log.info("[%s] 1/4 training %d updates of %s", name, config.steps, producer, extra=STAGE)
    run = _train(config, Path(config.out) / name, producer, options)
    log.info("[%s] 2/4 scanning %d checkpoints", name, len(checkpoints(run)), extra=STAGE)
    # scans are cached (ihprobe.core.cache) by each checkpoint's weights: a rerun scans nothing
    bars = None if config.progress else False  # a bar only when stderr is a terminal
    table = trajectory(run, list(TRAJECTORY_METRICS), progress=bars, seed=config.seed)
    log.info("[%s] 3/4 finding the emergence point", name, extra=STAGE)
    shape = {"batch_size": config.batch_size, "context": config.context}
    model = ihprobe.load(checkpoints(run)[-1].source)
    log.info(
        "[%s] 4/4 ablating the top heads against %d random draws", name, config.random, extra=STAGE
    )
    scores = ihprobe.scan(model, seed=config.seed)
    ablations = _ablations(config, model, scores)
    study = Study(
        run=run,
        producer=producer,
        options=options,
        table=table,
        losses=losses(run),
        point=emergence(table, "prefix_matching", **shape),
        ar_point=emergence(table, "ar_accuracy", **shape),
        prediction=predict_emergence(config.batch_size, config.context),
        model=model,
        scores=scores,
        ablation=ablations["layer-matched"],
        ablations=ablations,
        effects=ihprobe.head_effects(model, ABLATION_METRICS, seed=config.seed),
        summary={},
        positions=loss_by_position_over_run(run, rows=8, seed=config.seed),
    )
    study.summary = _summary(name, study)
    return study


def _summary(name: str, study: Study) -> dict:
    """The demo's numbers of a run (a row of ``summary.csv``)."""
    table, point, ar_point, model = study.table, study.point, study.ar_point, study.model
    first, final = checkpoints(study.run)[0], checkpoints(study.run)[-1]
    return {
        "run": name,
        "producer": study.producer,
        "steps": final.step,
        "tokens": final.tokens,
        "ps_start": _max_at(table, "prefix_matching", first.step),
        "ps_final": _max_at(table, "prefix_matching", final.step),
        "ar_start": _value_at(table, "ar_accuracy", first.step),
        "ar_final": _value_at(table, "ar_accuracy", final.step),
        "induction_loss_start": _value_at(table, "induction_loss", first.step),
        "induction_loss_final": _value_at(table, "induction_loss", final.step),
        "anti_induction_final": _max_at(table, "anti_induction", final.step),
        **chance_levels(model.cfg.d_vocab, default_n(model.cfg.n_ctx)),
        "emergence_updates": point.updates if point.transition else None,
        "emergence_low": point.updates_low if point.transition else None,
        "emergence_high": point.updates_high if point.transition else None,
        "threshold_step": point.threshold_step,
        "ar_emergence_updates": ar_point.updates if ar_point.transition else None,
        "law_updates": study.prediction.updates,
        "final_loss": _final_loss(study.losses),
        "induction_heads": " ".join(induction_heads(study.scores)),
        **_ablation_summary(study.ablation),
    }


def _ablations(config: DemoConfig, model, scores) -> dict:
    """The question at this scale: the model's top ``config.top`` prefix-matching heads (global
    scope) against layer-matched and score-matched draws, and [B]'s per-layer top 2% for
    reference.

    Layer-matched draws take as many heads from each layer as the top set holds there, so the
    number of distinct sets is C(others in the layer, k): 35 for 3 of layer 1's 10 heads, while
    a permutation p-value needs 19 or more to reach 1/20 (the result says how many there are).
    """
    common = {"metrics": ABLATION_METRICS, "random": config.random, "seed": config.seed,
              "scores": scores.head_metric("prefix_matching")}  # fmt: skip
    top = {"scope": "global", "top": config.top}
    return {
        "layer-matched": ihprobe.ablate(model, **top, **common),
        "score-matched": ihprobe.ablate(model, **top, baseline="score-matched", **common),
        "per-layer": ihprobe.ablate(model, **common),
    }


def demo_run(out: str | os.PathLike = "runs/demo", config: DemoConfig = DemoConfig()) -> Path:
    """The demo's main run, ``out/main``: trained with the demo's settings, or reused as it is
    when a finished run with them is there (the notebooks share ``make demo``'s run).

    Example:
        >>> run = demo_run("runs/demo")          # doctest: +SKIP
    """
    producer, options = variants(config)["main"]
    with torch_threads(config.threads):
        return _train(replace(config, out=str(out)), Path(out) / "main", producer, options)


def _train_config(config: DemoConfig, out: Path, producer: str, options: dict) -> TrainConfig:
    return TrainConfig(
        out=str(out), producer=producer, producer_options=options, layers=config.layers,
        heads=config.heads, d_model=config.d_model, d_mlp=config.d_mlp, context=config.context,
        batch_size=config.batch_size, steps=config.steps, lr=config.lr, seed=config.seed,
        schedule=config.schedule, checkpoints=config.checkpoints,
        n_checkpoints=config.n_checkpoints, progress=config.progress,
    )  # fmt: skip


def _train(config: DemoConfig, out: Path, producer: str, options: dict) -> Path:
    """Train the run, or return it untouched when a run with the same config finished."""
    train_config = _train_config(config, out, producer, options)
    changed = config_changes(out, asdict(train_config), ignore=("progress", "out"))
    if is_finished(out) and not changed:
        log.info("%s already finished; reusing it", out)
        return out
    if out.exists():
        log.warning("%s holds an unfinished or different run; training it again", out)
        shutil.rmtree(out)
    return train(train_config)


def _max_at(table: pd.DataFrame, metric: str, step: int) -> float:
    rows = table[(table.metric == metric) & (table.step == step)]
    return float(rows.value.max())


def _value_at(table: pd.DataFrame, metric: str, step: int) -> float:
    rows = table[(table.metric == metric) & (table.step == step)]
    return float(rows.value.iloc[0])


def _final_loss(losses: pd.DataFrame) -> float | None:
    return float(losses.loss.tail(5).mean()) if len(losses) else None


def chance_levels(d_vocab: int, n: int) -> dict[str, float]:
    """The demo's metrics without induction (the metric table's chance levels): a uniform
    head's prefix-matching score, 1/V accuracy, and the uniform-guess loss ln V.

    Example:
        >>> round(chance_levels(64, 32)["induction_loss_chance"], 3)  # ln 64
        4.159
    """
    return {f"{m}_chance": METRIC_TABLE[m].chance(d_vocab, n)
            for m in ("prefix_matching", "ar_accuracy", "induction_loss")}  # fmt: skip


def induction_heads(scores: HeadScores) -> list[str]:
    """Names ``L{layer}H{head}`` of the heads whose prefix matching reaches the formed threshold."""
    ps = scores.head_metric("prefix_matching")
    formed = torch.nonzero(ps >= THRESHOLD).tolist()
    return [f"L{layer}H{head}" for layer, head in formed]


def _ablation_summary(result: AblationResult) -> dict:
    frame = result.summary()
    verdict = result.verdict("ar_accuracy")
    out = {"verdict": verdict.answer, "verdict_reason": verdict.reason}
    for metric in ("ar_accuracy", "induction_loss"):
        if metric in frame.metric.values:
            row = frame[frame.metric == metric].iloc[0]
            out[f"{metric}_relative_change"] = float(row.relative_change)
            out[f"{metric}_random_relative_change"] = float(row.random_relative_change_mean)
            out[f"{metric}_p"] = float(row.p_value)
            out[f"{metric}_p_distinct"] = float(row.p_distinct)
            out[f"{metric}_distinct_sets"] = int(row.distinct_sets)
            out[f"{metric}_index"] = float(row.load_bearing_index)
            out[f"{metric}_index_low"] = float(row.load_bearing_lo)
            out[f"{metric}_index_high"] = float(row.load_bearing_hi)
    return out


def summary_text(result: DemoResult) -> str:
    """The demo's findings in a few lines per run, then where the files are."""
    lines = []
    for s in result.summary.to_dict("records"):
        lines += [
            f"{s['run']}: {s['producer']}, {s['steps']:,} updates, {s['tokens']:,} tokens",
            f"  max prefix matching   {s['ps_start']:.3f} -> {s['ps_final']:.3f}"
            f"   (chance {s['prefix_matching_chance']:.3f})",
            f"  AR accuracy           {s['ar_start']:.3f} -> {s['ar_final']:.3f}"
            f"   (chance {s['ar_accuracy_chance']:.3f})",
            f"  induction loss        {s['induction_loss_start']:.2f} -> "
            f"{s['induction_loss_final']:.2f}   (uniform guess {s['induction_loss_chance']:.2f})",
            f"  emergence             {_emergence_words(s)}",
            f"  induction heads       {_heads_words(s)}",
        ]
        if "ar_accuracy_p" in s:
            lines.append(
                f"  ablation              AR accuracy {s['ar_accuracy_relative_change']:+.1%} "
                f"(random heads {s['ar_accuracy_random_relative_change']:+.1%}), "
                f"p = {s['ar_accuracy_p']:.2g} ({s['ar_accuracy_p_distinct']:.2g} over "
                f"{s['ar_accuracy_distinct_sets']} distinct sets), "
                f"load-bearing index {s['ar_accuracy_index']:.2g} "
                f"[{s['ar_accuracy_index_low']:.2g}, {s['ar_accuracy_index_high']:.2g}]"
            )
            lines.append(f"  verdict               {s['verdict']}: {s['verdict_reason']}")
    note = compare_note(result.summary, default_steps=DemoConfig.steps)
    lines += ["", f"report: {result.report}"]
    lines += [f"  {name + ':':<20} {path}" for name, path in result.tables.items()]
    lines += ["", *([note] if note else []), *map(_conclusion, result.summary.to_dict("records"))]
    return "\n".join(lines)


def _heads_words(s: dict) -> str:
    if not s["induction_heads"]:
        return f"none (no head's prefix matching reaches {THRESHOLD})"
    return f"{s['induction_heads'].replace(' ', ', ')} (prefix matching >= {THRESHOLD})"


def _conclusion(s: dict) -> str:
    """The run's last line: the heads found and the one verdict."""
    heads = s["induction_heads"].replace(" ", ", ") or "none"
    verdict = f"; verdict on its top heads (AR accuracy): {s['verdict']}" if "verdict" in s else ""
    return f"{s['run']}: induction heads found: {heads}{verdict}."


def _emergence_words(s: dict) -> str:
    law = f"the law predicts {s['law_updates']:,.0f}"
    if s["emergence_updates"] is None or pd.isna(s["emergence_updates"]):
        return f"no transition detected ({law})"
    return (f"~{s['emergence_updates']:,.0f} updates (between {s['emergence_low']:,.0f} and "
            f"{s['emergence_high']:,.0f}); {law}")  # fmt: skip


def _csv(frame: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
