"""The main job: train a tiny model, watch its induction heads emerge, test whether it needs them.

``ihprobe demo`` (``make demo``) runs the whole toolkit end to end on CPU in a few minutes:

1. train a 2-layer GPT-NeoX on natural text with repeats at random positions and periods
   (content-based induction is the only way to predict them), with checkpoints;
2. scan every checkpoint (prefix matching, AR accuracy, ...) into one trajectory table;
3. find the emergence point and put the law's prediction beside it;
4. ablate the top-2% heads of the final checkpoint against 20 random draws;
5. write ``report.html`` and the CSVs.

``compare=True`` also trains a Bi-Induct variant at matched compute ([B]'s comparison).

>>> result = run_demo(DemoConfig(out="runs/demo"))       # doctest: +SKIP
>>> result.report
PosixPath('runs/demo/report.html')
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import ihprobe
from ihprobe.ablation import check_settings
from ihprobe.changepoint import emergence
from ihprobe.demo_report import write_demo_report
from ihprobe.files import atomic_write, check_writable_dir
from ihprobe.law import predict_emergence
from ihprobe.runs import checkpoints, config_changes, is_finished, losses
from ihprobe.train_config import TrainConfig, check_config
from ihprobe.trainer import train
from ihprobe.trajectories import trajectory

log = logging.getLogger(__name__)

# Metrics the demo follows over training (one cheap scan per checkpoint).
TRAJECTORY_METRICS = (
    "prefix_matching", "previous_token", "duplicate_token", "forward_induction",
    "anti_induction", "ar_accuracy", "induction_loss",
)  # fmt: skip


@dataclass(frozen=True)
class DemoConfig:
    """What the demo trains and how it probes it. The defaults finish in minutes on 2 cores."""

    out: str = "runs/demo"  # output directory: runs, CSVs and report.html
    producer: str = "repeats"  # natural text that turns periodic at a random point (README)
    producer_options: dict = field(
        default_factory=lambda: {
            "period": (8, 32),  # period drawn per row: no fixed offset solves the repeats
            "start": (0, 8),  # where a row turns periodic, drawn per row
            "vocab_size": 300,  # a small byte-level BPE of the embedded corpus
        }
    )
    layers: int = 2  # Elhage et al.: induction needs two layers (composition)
    heads: int = 4
    d_model: int = 64
    context: int = 64  # C
    batch_size: int = 32  # B
    steps: int = 2000  # updates
    lr: float = 3e-3
    schedule: str = "constant"  # a cosine decay slows the transition past the end of the run
    checkpoints: str = "linear"  # the transition is late in a short run: resolve it evenly
    n_checkpoints: int = 20  # plus step 0
    random: int = 20  # random draws of the ablation baseline
    seed: int = 0
    compare: bool = False  # also train a Bi-Induct variant (balanced directions) for [B]
    progress: bool = True  # tqdm bars


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
        base = {"vocab_size": config.producer_options.get("vocab_size", 300)}
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
    studies = {name: _study(config, name, producer, options)
               for name, (producer, options) in variants(config).items()}  # fmt: skip
    tables = {}
    for name, study in studies.items():
        tables[f"{name}/trajectory"] = _csv(study["table"], out / f"{name}-trajectory.csv")
        tables[f"{name}/ablation"] = _csv(
            study["ablation"].to_frame(), out / f"{name}-ablation.csv"
        )
    summary = pd.DataFrame([study["summary"] for study in studies.values()])
    tables["summary"] = _csv(summary, out / "summary.csv")
    report = write_demo_report(out / "report.html", config, studies, summary)
    return DemoResult(report=report, runs={n: s["run"] for n, s in studies.items()},
                      tables=tables, summary=summary)  # fmt: skip


def _study(config: DemoConfig, name: str, producer: str, options: dict) -> dict:
    """One run: train (or reuse a finished run), trajectory, emergence, law, ablation."""
    run = _train(config, Path(config.out) / name, producer, options)
    table = trajectory(run, list(TRAJECTORY_METRICS), cache=Path(config.out) / ".cache",
                       progress=config.progress, seed=config.seed)  # fmt: skip
    point = emergence(table, "prefix_matching", batch_size=config.batch_size,
                      context=config.context)  # fmt: skip
    ar_point = emergence(table, "ar_accuracy", batch_size=config.batch_size,
                         context=config.context)  # fmt: skip
    prediction = predict_emergence(config.batch_size, config.context)
    final = checkpoints(run)[-1]
    model = ihprobe.load(final.source)
    ablation = ihprobe.ablate(model, random=config.random, seed=config.seed)
    scores = ihprobe.scan(model, seed=config.seed)
    first = checkpoints(run)[0]
    summary = {
        "run": name,
        "producer": producer,
        "steps": final.step,
        "tokens": final.tokens,
        "ps_start": _max_at(table, "prefix_matching", first.step),
        "ps_final": _max_at(table, "prefix_matching", final.step),
        "ar_start": _value_at(table, "ar_accuracy", first.step),
        "ar_final": _value_at(table, "ar_accuracy", final.step),
        "anti_induction_final": _max_at(table, "anti_induction", final.step),
        "emergence_updates": point.updates if point.transition else None,
        "emergence_low": point.updates_low if point.transition else None,
        "emergence_high": point.updates_high if point.transition else None,
        "threshold_step": point.threshold_step,
        "ar_emergence_updates": ar_point.updates if ar_point.transition else None,
        "law_updates": prediction.updates,
        "final_loss": _final_loss(losses(run)),
        **_ablation_summary(ablation),
    }
    return {"run": run, "table": table, "point": point, "ar_point": ar_point,
            "prediction": prediction, "ablation": ablation, "scores": scores, "model": model,
            "losses": losses(run), "summary": summary, "producer": producer,
            "options": options}  # fmt: skip


def _train_config(config: DemoConfig, out: Path, producer: str, options: dict) -> TrainConfig:
    return TrainConfig(
        out=str(out), producer=producer, producer_options=options, layers=config.layers,
        heads=config.heads, d_model=config.d_model, context=config.context,
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


def _ablation_summary(result) -> dict:
    frame = result.summary()
    out = {}
    for metric in ("ar_accuracy", "induction_loss"):
        if metric in frame.metric.values:
            row = frame[frame.metric == metric].iloc[0]
            out[f"{metric}_top_drop"] = float(row.relative_change)
            out[f"{metric}_random_drop"] = float(row.random_relative_change_mean)
            out[f"{metric}_p"] = float(row.p_value)
    return out


def _csv(frame: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
