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
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import pandas as pd

import ihprobe
from ihprobe.causal.ablation import check_settings
from ihprobe.causal.choices import DEFAULT_BASELINE, DEFAULT_SCOPE, DEFAULT_TOP
from ihprobe.circuit.positions import loss_by_position_trajectory
from ihprobe.core.files import atomic_write, check_writable_dir
from ihprobe.core.stages import STAGE
from ihprobe.core.threads import DEFAULT_THREADS, torch_threads
from ihprobe.dynamics.changepoint import emergence
from ihprobe.dynamics.law import predict_emergence
from ihprobe.dynamics.trajectories import trajectory
from ihprobe.figures.demo_report import write_demo_report
from ihprobe.io.provenance import csv_table
from ihprobe.io.runs import RunDir, checkpoints, config_changes, is_finished, losses
from ihprobe.jobs.demo_summary import DemoResult, Study, summary_row
from ihprobe.training.config import TrainConfig, check_config
from ihprobe.training.presets import DEMO
from ihprobe.training.trainer import train

log = logging.getLogger(__name__)

# Metrics the demo follows over training (one cheap scan per checkpoint).
TRAJECTORY_METRICS = (
    "prefix_matching",
    "previous_token",
    "duplicate_token",
    "forward_induction_varied",
    "anti_induction",
    "ar_accuracy",
    "induction_loss",
)
ABLATION_METRICS = ("ar_accuracy", "induction_loss", "ar_mean_rank")


@dataclass(frozen=True)
class DemoConfig:
    """What the demo trains (the :data:`~ihprobe.training.presets.DEMO` preset unless a field
    says otherwise) and how it probes it. The defaults finish in about a minute and a half on
    2 cores (lab/benchmarks/bench_demo.py); heads form after a few hundred updates.

    Example:
        >>> DemoConfig().layers, DemoConfig().heads, DemoConfig(steps=100).steps
        (2, 10, 100)
    """

    # the run (ihprobe.training.presets.DEMO holds the values and says why)
    out: str = DEMO.out  # output directory: runs, CSVs and report.html
    producer: str = DEMO.producer
    producer_options: dict = field(default_factory=lambda: dict(DEMO.producer_options))
    layers: int = DEMO.layers
    heads: int = DEMO.heads
    d_model: int = DEMO.d_model
    d_mlp: int | None = DEMO.d_mlp  # 4 * d_model; 0: attention-only
    context: int = DEMO.context  # C
    batch_size: int = DEMO.batch_size  # B
    steps: int = DEMO.steps  # updates
    lr: float = DEMO.lr
    schedule: str = DEMO.schedule
    checkpoints: str = DEMO.checkpoints
    n_checkpoints: int = DEMO.n_checkpoints  # plus step 0
    seed: int = DEMO.seed
    # what the demo does with it
    top: int = DEFAULT_TOP  # the top set: the model's 3 highest prefix-matching heads (ablate's)
    random: int = 20  # random draws of the ablation baseline
    compare: bool = False  # also train a Bi-Induct variant (balanced directions) for [B]
    progress: bool = True  # tqdm bars, on a terminal only (as the trainer's)
    # intra-op threads: a model this small gains nothing from more, and on shared cores the
    # extra threads spin-wait (ihprobe.core.threads, lab/benchmarks/bench_threads.py)
    threads: int = DEFAULT_THREADS

    def train_config(self, run: str = "main") -> TrainConfig:
        """The TrainConfig of one of the demo's runs (``"main"``; with ``compare`` also
        ``"natural"`` and ``"bi-induct"``), trained into ``out/run``.

        Example:
            >>> config = DemoConfig(out="runs/x", steps=100).train_config()
            >>> config.out, config.steps, config.producer
            ('runs/x/main', 100, 'repeats')
        """
        producer, options = variants(self)[run]
        return _train_config(self, Path(self.out) / run, producer, options)


# the DemoConfig fields that set the run (out and the data are set per run)
RUN_FIELDS = tuple(
    f.name
    for f in fields(DemoConfig)
    if f.name in {g.name for g in fields(TrainConfig)}
    and f.name not in ("out", "producer", "producer_options")
)


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

    Example:
        >>> result = run_demo(DemoConfig(out="runs/demo"))  # a minute of CPU  # doctest: +SKIP
        >>> DemoConfig(out="runs/short", steps=100).out         # what it would train
        'runs/short'
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
        positions=loss_by_position_trajectory(run, rows=8, seed=config.seed),
    )
    study.summary = summary_row(name, study)
    return study


def _ablations(config: DemoConfig, model, scores) -> dict:
    """The question at this scale: the model's top ``config.top`` prefix-matching heads (global
    scope) against layer-matched and score-matched draws, and [B]'s per-layer top 2% for
    reference.

    Layer-matched draws take as many heads from each layer as the top set holds there, so the
    number of distinct sets is C(others in the layer, k): 35 for 3 of layer 1's 10 heads, while
    a permutation p-value needs 19 or more to reach 1/20 (the result says how many there are).
    """
    common = {
        "metrics": ABLATION_METRICS,
        "draws": config.random,
        "seed": config.seed,
        "scores": scores.head_metric("prefix_matching"),
    }
    top = {"scope": DEFAULT_SCOPE, "top": config.top}  # `ihprobe ablate`'s default rule
    return {
        "layer-matched": ihprobe.ablate(model, **top, baseline=DEFAULT_BASELINE, **common),
        "score-matched": ihprobe.ablate(model, **top, baseline="score-matched", **common),
        "per-layer": ihprobe.ablate(model, scope="layer", top=0.02, **common),
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
    """The demo's preset with this config's run settings (the DemoConfig fields that are
    TrainConfig fields)."""
    settings = {name: getattr(config, name) for name in RUN_FIELDS}
    return replace(DEMO, **settings, out=str(out), producer=producer, producer_options=options)


def _train(config: DemoConfig, out: Path, producer: str, options: dict) -> Path:
    """Train the run, or return it untouched when a run with the same config finished."""
    train_config = _train_config(config, out, producer, options)
    changed = config_changes(out, asdict(train_config), ignore=("progress", "out"))
    if is_finished(out) and not changed:
        log.info("%s already finished; reusing it", out)
        return out
    if out.exists():
        log.warning("%s holds an unfinished or different run; training it again", out)
        RunDir(out).clear()  # what the trainer wrote; a user's file there is then refused
    return train(train_config)


def _csv(frame: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
