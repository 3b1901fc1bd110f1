"""The demo's results (:class:`Study` per run, :class:`DemoResult`) and its numbers and words: one
row of ``summary.csv`` per run (:func:`summary_row`) and the lines the command prints
(:func:`summary_text`). The verdicts are the results' own
(``AblationResult.verdict``).

>>> round(chance_levels(64, 32)["ar_accuracy_chance"], 4)
0.0156
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from ihprobe.causal.choices import analysis
from ihprobe.causal.results import AblationResult, HeadEffects
from ihprobe.dynamics.changepoint import EmergencePoint
from ihprobe.dynamics.law import Prediction
from ihprobe.figures.demo_text import THRESHOLD, compare_note
from ihprobe.io.runs import checkpoints
from ihprobe.probes.inputs import default_n
from ihprobe.probes.metrics import METRIC_TABLE
from ihprobe.probes.scores import HeadScores
from ihprobe.training.presets import DEMO


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


def summary_row(name: str, study: Study) -> dict:
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
        **_analyses(study.ablation, study.ablations),
    }


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
    metrics = ("prefix_matching", "ar_accuracy", "induction_loss")
    return {f"{m}_chance": METRIC_TABLE[m].chance(d_vocab, n) for m in metrics}


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


def _analyses(main: AblationResult, ablations: dict[str, AblationResult]) -> dict:
    """Which analysis the verdict follows, what the others answer, and the main one's notes
    (heads left out at chance, repeated draws), each as one line of text."""
    metric = "ar_accuracy"
    others = [
        f"{name}: {result.verdict(metric).answer}"
        + (
            " (its top set holds heads below the level that counts as formed)"
            if _unsigned(result)
            else ""
        )
        for name, result in ablations.items()
        if result is not main
    ]
    return {
        "analysis": analysis(main.settings, main.by, len(main.random_heads)),
        "other_analyses": "; ".join(others),
        "ablation_notes": " | ".join(main.settings.get("notes", [])),
    }


def _unsigned(result: AblationResult) -> bool:
    """Whether the result's top set holds heads at chance or below the level that counts as
    formed (:func:`~ihprobe.causal.head_sets.without_signature` noted them)."""
    notes = result.settings.get("notes", [])
    return any("without the signature" in n or "counts as formed" in n for n in notes)


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
            lines.append(
                f"  analysis              {s['analysis']} (`ihprobe ablate`'s default); "
                f"the others say {s['other_analyses']} (the report compares them)"
            )
            notes = s.get("ablation_notes")
            if isinstance(notes, str) and notes:  # "" (or NaN read back) when there are none
                lines += [f"  note                  {n}" for n in notes.split(" | ")]
    note = compare_note(result.summary, default_steps=DEMO.steps)
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
    return (
        f"~{s['emergence_updates']:,.0f} updates (between {s['emergence_low']:,.0f} and "
        f"{s['emergence_high']:,.0f}); {law}"
    )
