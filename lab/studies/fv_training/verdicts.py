"""The FV training study's verdict sentences, each chosen by code from the CSV's rows.

A row is one seed's record (``measure.measure``, read back from the CSV); ``series`` is its
checkpoints' JSON. The rules are the package docstring's; every sentence names its seeds.

>>> induction_verdict([])
'pending: no seed has finished.'
>>> head_name((1, 2))
'L1H2'
"""

from __future__ import annotations

import json
import math

import numpy as np
from scipy import stats

from lab.studies.fv_training import INDUCTION_PS, STEPS

ANSWERS = ("load-bearing", "signature only", "inconclusive", "no induction heads to test")


def head_name(head) -> str:
    return f"L{head[0]}H{head[1]}"


def done(rows: list[dict]) -> list[dict]:
    """The finished seeds' rows, by seed."""
    return sorted((r for r in rows if r.get("status") == "done"), key=lambda r: r["seed"])


def series(row: dict) -> list[dict]:
    """One seed's checkpoint records (empty when it has none)."""
    text = row.get("series")
    return json.loads(text) if isinstance(text, str) and text else []


def induction_heads(record: dict, threshold: float = INDUCTION_PS) -> set[tuple[int, int]]:
    """Heads whose prefix matching reaches ``threshold`` at one checkpoint.

    >>> sorted(induction_heads({"ps": [[0.01, 0.3], [0.12, None]]}))
    [(0, 1), (1, 0)]
    """
    return {
        (a, b)
        for a, layer in enumerate(record["ps"])
        for b, v in enumerate(layer)
        if v is not None and v >= threshold
    }


def fv_heads(record: dict) -> set[tuple[int, int]]:
    return {tuple(h) for h in record["fv_heads"]}


def _placed(row: dict) -> bool:
    return bool(row.get("transition")) and not bool(row.get("censored"))


def induction_verdict(rows: list[dict]) -> str:
    """Whether induction heads formed, by the grid's onset rule, in how many seeds."""
    rows = done(rows)
    if not rows:
        return "pending: no seed has finished."
    placed = [r for r in rows if _placed(r)]
    if not placed:
        return (
            f"No induction head formed by {STEPS:,} updates in any of {len(rows)} seeds (no "
            "placed onset of the live probes' max prefix matching) at this scale."
        )
    onsets = ", ".join(f"seed {r['seed']} at {float(r['updates']):,.0f}" for r in placed)
    carriers = "; ".join(
        f"seed {r['seed']}: {', '.join(map(head_name, sorted(induction_heads(s[-1])))) or 'none'}"
        for r in rows
        if (s := series(r))
    )
    return (
        f"Induction heads formed in {len(placed)} of {len(rows)} seeds (onsets in updates: "
        f"{onsets}). Heads with prefix matching >= {INDUCTION_PS:g} at the last checkpoint: "
        f"{carriers or 'not measured'}."
    )


def tasks_above(record: dict) -> list[tuple[str, float, float]]:
    """``(task, clean accuracy, chance)`` of the tasks done above chance at one checkpoint."""
    return [(name, acc, chance) for name, (acc, chance, used) in record["tasks"].items() if used]


def fv_verdict(rows: list[dict]) -> str:
    """Whether FV heads appear (and when), or why there are none, over the seeds."""
    rows = [r for r in done(rows) if series(r)]
    if not rows:
        return "pending: no seed has finished."
    with_tasks = [r for r in rows if tasks_above(series(r)[-1])]
    if not with_tasks:
        return (
            f"No task is done above chance at the last checkpoint of any of {len(rows)} seeds, "
            "so no head has an FV score: no FV heads at this scale."
        )
    found = [(r, next((p for p in series(r) if p["fv_heads"]), None)) for r in rows]
    found = [(r, p) for r, p in found if p is not None]
    if not found:
        return (
            f"{len(with_tasks)} of {len(rows)} seeds do some task above chance, but no head's FV "
            "score is above zero (p <= 0.05, Bonferroni over heads) at any checkpoint of any "
            "seed: no FV heads at this scale."
        )
    first = "; ".join(
        f"seed {r['seed']}: first at {p['step']:,} updates "
        f"({', '.join(map(head_name, sorted(fv_heads(p))))}), at the last checkpoint "
        f"{', '.join(map(head_name, sorted(fv_heads(series(r)[-1])))) or 'none'}"
        for r, p in found
    )
    return f"FV heads appear in {len(found)} of {len(rows)} seeds: {first}."


def moves(records: list[dict]) -> list[tuple[tuple[int, int], str, int, int]]:
    """``(head, direction, from step, to step)``: a head of one kind only at one checkpoint and
    of the other kind only at a later one (the first such pair of checkpoints per direction).

    >>> moves([{"step": 1, "ps": [[0.5, 0.0]], "fv_heads": []},
    ...        {"step": 2, "ps": [[0.0, 0.0]], "fv_heads": [[0, 0]]}])
    [((0, 0), 'induction to FV', 1, 2)]
    """
    found = []
    kinds = [(induction_heads(p), fv_heads(p), p["step"]) for p in records]
    heads = {h for ind, fv, _ in kinds for h in ind | fv}
    for head in sorted(heads):
        for direction, a, b in (("induction to FV", 0, 1), ("FV to induction", 1, 0)):
            start = next((k for k in kinds if head in k[a] and head not in k[b]), None)
            if start is None:
                continue
            later = [k for k in kinds if k[2] > start[2] and head in k[b] and head not in k[a]]
            if later:
                found.append((head, direction, start[2], later[0][2]))
    return found


def relation_verdict(rows: list[dict]) -> str:
    """Whether the two kinds share heads at the end, and whether any head moves between them."""
    rows = [r for r in done(rows) if series(r)]
    if not rows:
        return "pending: no seed has finished."
    if not any(fv_heads(p) for r in rows for p in series(r)):
        return "No head can move between the kinds or carry both: no FV head formed in any seed."
    shared = [r for r in rows if induction_heads(series(r)[-1]) & fv_heads(series(r)[-1])]
    moved = [(r["seed"], m) for r in rows for m in moves(series(r))]
    both = (
        f"At the last checkpoint a head is both an induction head and an FV head in "
        f"{len(shared)} of {len(rows)} seeds."
    )
    if not moved:
        return both + " No head moves from one kind to the other in any seed."
    told = "; ".join(
        f"seed {s}: {head_name(h)} {d} ({a:,} to {b:,} updates)" for s, (h, d, a, b) in moved
    )
    return both + f" Heads that move: {told}."


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval over seeds (NaN bounds with fewer than 2 finite values).

    >>> mean_interval([1.0, 3.0])[0]
    2.0
    """
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    if len(v) < 2:
        return float(v[0]), math.nan, math.nan
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def kind_verdict(rows: list[dict], kind: str, measure: str) -> str:
    """One cell of the 2 x 2 table over the seeds: the count of each answer ``kind_table`` gave."""
    rows = done(rows)
    key = f"kind_{kind}_{measure.replace('@', '')}_answer"
    answers = [r.get(key) for r in rows if isinstance(r.get(key), str) and r.get(key)]
    if not rows:
        return "pending"
    if not answers:
        return f"no table in any of {len(rows)} seeds"
    counts = [f"{answers.count(a)} {a}" for a in ANSWERS if answers.count(a)]
    lead = max(ANSWERS, key=answers.count)
    if answers.count(lead) == len(rows):
        return f"{lead} in every seed ({len(rows)})"
    return f"{', '.join(counts)} of {len(rows)} seeds: no answer common to every seed"
