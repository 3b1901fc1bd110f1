"""The FV training study's results file, rendered from its CSV of record.

>>> import pandas as pd
>>> "pending" in report(pd.DataFrame([{"cell": "B4-C256", "seed": 0, "status": "pending"}]), [])
True
"""

from __future__ import annotations

import math

import pandas as pd

import lab.studies.fv_training as design
from lab.studies.fv_training.measure import KINDS, MEASURES
from lab.studies.fv_training.verdicts import (
    done,
    fv_heads,
    fv_verdict,
    head_name,
    induction_heads,
    induction_verdict,
    kind_verdict,
    mean_interval,
    relation_verdict,
    series,
    tasks_above,
)


def _num(value, fmt: str = ".3f") -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(value) else format(value, fmt)


def _heads(heads) -> str:
    return ", ".join(map(head_name, sorted(heads))) or "none"


def _top(matrix) -> str:
    """The best head of a ``[layer][head]`` list and its value ('-' when all are None)."""
    cells = [
        (v, (a, b)) for a, row in enumerate(matrix) for b, v in enumerate(row) if v is not None
    ]
    if not cells:
        return "-"
    value, head = max(cells)
    return f"{head_name(head)} {value:.3f}"


def runs_table(rows: list[dict]) -> list[str]:
    lines = [
        "| seed | status | onset (updates) | max_ps | loss_final | tasks above chance at the end "
        "(clean accuracy / chance) | FV heads at the end |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r.get("status") != "done":
            lines.append(f"| {r['seed']} | {r.get('status', 'pending')} |  |  |  |  |  |")
            continue
        placed = bool(r.get("transition")) and not bool(r.get("censored"))
        onset = f"{float(r['updates']):,.0f}" if placed else f">= {float(r['updates']):,.0f}"
        last = (series(r) or [None])[-1]
        tasks = ", ".join(f"{n} {a:.2f}/{c:.2f}" for n, a, c in tasks_above(last)) if last else ""
        fv = _heads(fv_heads(last)) if last else ""
        loss = _num(r.get("train_loss_final"))
        lines.append(
            f"| {r['seed']} | done | {onset} | {_num(r.get('max_ps'))} | {loss} | "
            f"{tasks or 'none'} | {fv} |"
        )
    return lines


def series_table(row: dict) -> list[str]:
    lines = [
        f"Seed {row['seed']}:",
        "",
        "| updates | induction heads | top prefix matching | FV heads | significant without the "
        "floor | top FV score | tasks above chance |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in series(row):
        tasks = ", ".join(n for n, _, _ in tasks_above(p)) or "none"
        lines.append(
            f"| {p['step']:,} | {_heads(induction_heads(p))} | {_top(p['ps'])} | "
            f"{_heads(fv_heads(p))} | {_heads(map(tuple, p.get('fv_heads_significant', [])))} | "
            f"{_top(p['fv'])} | {tasks} |"
        )
    return [*lines, ""]


def kind_tables(rows: list[dict]) -> list[str]:
    lines = [
        "| seed | ablated | measure | change | load-bearing index [95% interval] | answer |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r.get("kind_error") and isinstance(r.get("kind_error"), str):
            lines.append(f"| {r['seed']} | - | - | - | - | no table: {r['kind_error']} |")
            continue
        for kind in KINDS:
            for measure in MEASURES:
                k = f"kind_{kind}_{measure.replace('@', '')}"
                lo, hi = _num(r.get(k + "_load_bearing_lo")), _num(r.get(k + "_load_bearing_hi"))
                index = f"{_num(r.get(k + '_load_bearing_index'))} [{lo}, {hi}]"
                lines.append(
                    f"| {r['seed']} | {kind} | {measure} | {_num(r.get(k + '_change'))} | {index} |"
                    f" {r.get(k + '_answer', '')} |"
                )
    lines += [
        "",
        "Over the seeds (the mean load-bearing index with its 95% t-interval over seeds; the "
        "verdict counts `kind_table`'s answer in each seed):",
        "",
        "| ablated | measure | mean index [95% t-interval over seeds] | verdict |",
        "| --- | --- | --- | --- |",
    ]
    for kind in KINDS:
        for measure in MEASURES:
            k = f"kind_{kind}_{measure.replace('@', '')}_load_bearing_index"
            mean, lo, hi = mean_interval([_float(r.get(k)) for r in rows])
            interval = f"[{_num(lo)}, {_num(hi)}]" if not math.isnan(lo) else "(no interval)"
            shown = f"{_num(mean)} {interval}" if not math.isnan(mean) else "-"
            lines.append(f"| {kind} | {measure} | {shown} | {kind_verdict(rows, kind, measure)} |")
    return lines


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def report(frame: pd.DataFrame, provenance: list[str]) -> str:
    rows = frame.to_dict("records")
    finished = done(rows)
    lines = ["# FV heads beside induction heads over training", "", *provenance, ""]
    lines += ["## Declared design (written before the first run)", ""]
    lines += [(design.__doc__ or "").strip(), ""]
    lines += ["## Runs", "", f"{len(finished)} of {len(rows)} seeds finished.", ""]
    lines += [*runs_table(rows), ""]
    lines += ["## Verdicts", ""]
    lines += [f"- Induction heads: {induction_verdict(rows)}"]
    lines += [f"- FV heads: {fv_verdict(rows)}"]
    lines += [f"- The two kinds: {relation_verdict(rows)}", ""]
    lines += ["## Over training", ""]
    for r in finished:
        lines += series_table(r)
    lines += ["## [B]'s question asked of both kinds: the 2 x 2 table at the last checkpoint", ""]
    lines += [
        "`ihprobe.kind_table` mean-ablates the top head by FV score (ranked on the built-in tasks) "
        "and the top head by prefix matching, against 20 random draws each, judged by few-shot "
        "accuracy on the 4 word tasks (hits@1) and by the ICL score; the index's interval is "
        "`kind_table`'s 95% interval. The fv rows ablate the top head by FV score whether or not "
        "it is an FV head by the rule above; a seed with no task above chance has no table.",
        "",
    ]
    lines += [*kind_tables(finished), ""]
    lines += [
        "Runs: `OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m lab.studies fv_training --cell "
        "B4-C256 --seed S` (resumable; a finished run is reused and measured once); this file: "
        "the same with `--report`.",
        "",
    ]
    return "\n".join(lines)
