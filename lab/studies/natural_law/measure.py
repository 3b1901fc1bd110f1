"""What one finished run of the natural-text grid measures: its onset, censoring and head check.

- **Onset**: the change point of the live probes' max prefix matching against log tokens
  (:func:`ihprobe.emergence`, whose rise counts from the steep segment's start to the highest
  level after it). A run without a transition is censored at its last probe; one whose rise
  starts in its last checkpoint interval is censored at its point (a lower bound).
- **Has an induction head**: a placed onset and :func:`ihprobe.head_check` on the final
  checkpoint (prefix matching at n = 10, 25, 50, the loss drop on the repeated half beyond
  chance, and the copying the head carries: ``copying_cost`` and ``copying_cost_matched``).
  ``head_rule`` names the rule that judged the row: ``copying`` (the head check as amended on
  2026-12-06) or ``damage`` (the superseded third part, for rows measured before; their
  checkpoints are gone, so they cannot be judged again). ``has_head_by_damage`` keeps the old
  rule's verdict beside the new one.
- **Training loss**: the final and the minimum logged training loss (``metrics.jsonl``), so that
  a flat run whose loss also stalled reads as a failed optimisation, not a late head.
- **Epochs**: training tokens over the corpus's training tokens.

>>> row = onset_row([], 4, 256)
>>> row["transition"], row["censored"], row["reason"]
(False, True, 'no live probes')
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

import ihprobe
from ihprobe import run_meta
from ihprobe.data import default_directory
from lab.studies.natural_law.cells import VOCAB


def probe_records(run: Path) -> list[dict]:
    path = Path(run) / "probes.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def onset_row(records: list[dict], batch_size: int, context: int) -> dict:
    """The onset in updates and tokens, whether it is censored, and why (see the module doc)."""
    if not records:
        return {"transition": False, "censored": True, "reason": "no live probes"}
    table = pd.DataFrame(
        {
            "step": [r["step"] for r in records],
            "tokens": [r["tokens"] for r in records],
            "metric": "prefix_matching",
            "value": [r["max_prefix_matching"] for r in records],
        }
    )
    last = records[-1]
    try:
        point = ihprobe.emergence(table, batch_size=batch_size, context=context)
    except ihprobe.IhprobeError as err:
        return {
            "transition": False,
            "censored": True,
            "reason": str(err),
            "updates": float(last["step"]),
            "tokens": float(last["tokens"]),
        }
    if not point.transition:
        return {
            "transition": False,
            "censored": True,
            "reason": point.reason,
            "updates": float(last["step"]),
            "tokens": float(last["tokens"]),
        }
    return {
        "transition": True,
        "censored": bool(point.at_edge),
        "reason": "rise starts in the last interval" if point.at_edge else "",
        "updates": float(point.updates),
        "tokens": float(point.tokens),
    }


def training_losses(run: Path) -> dict:
    """The last and the lowest logged training loss of a run (NaN without ``metrics.jsonl``).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> lines = ['{"loss": 5.0}', '{"loss": 3.0}', '{"loss": 3.5}']
    >>> _ = (folder / "metrics.jsonl").write_text(chr(10).join(lines))
    >>> training_losses(folder)
    {'train_loss_final': 3.5, 'train_loss_min': 3.0}
    """
    path = Path(run) / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    losses = [json.loads(x)["loss"] for x in lines if x.strip()]
    losses = [float(v) for v in losses if v is not None]
    if not losses:
        return {"train_loss_final": math.nan, "train_loss_min": math.nan}
    return {"train_loss_final": losses[-1], "train_loss_min": min(losses)}


def corpus_tokens() -> int | None:
    """Training tokens of the corpus under the grid's BPE (None where it is not built)."""
    manifest = default_directory() / "manifest.json"
    if not manifest.is_file():
        return None
    return int(json.loads(manifest.read_text())["tokens"][f"bpe{VOCAB}"]["train"])


def curve(records: list[dict]) -> str:
    """``tokens_M: PS (AR)`` at every live probe of one run."""
    return ", ".join(
        f"{r['tokens'] / 1e6:.2f}: {r['max_prefix_matching']:.3f} ({r['ar_accuracy']:.3f})"
        for r in records
    )


def measure(run: Path, cell: str, seed: int) -> dict:
    """One finished run's row of the CSV of record."""
    meta = run_meta(run) or {}
    config = meta.get("config", {})
    batch_size, context = int(config["batch_size"]), int(config["context"])
    records = probe_records(run)
    onset = onset_row(records, batch_size, context)
    final = sorted(Path(run, "checkpoints").glob("step-*"))[-1]
    check = ihprobe.head_check(ihprobe.load(str(final), device="auto"))  # cuda where there is one
    total = records[-1]["tokens"] if records else 0
    corpus = corpus_tokens()
    return {
        "B": batch_size,
        "C": context,
        "steps": int(config["steps"]),
        "tokens_M": total / 1e6,
        "law_updates": ihprobe.predict_emergence(batch_size, context).updates,
        **onset,
        "max_ps": max((r["max_prefix_matching"] for r in records), default=math.nan),
        "final_ar": records[-1]["ar_accuracy"] if records else math.nan,
        "head": f"L{check.head[0]}H{check.head[1]}",
        **{f"ps_n{n}": v for n, v in check.prefix_matching.items()},
        "loss_drop": check.loss_drop,
        "ablation_cost": check.ablation_cost,
        "copying_cost": check.copying_cost,
        "copying_cost_matched": check.copying_cost_matched,
        "head_rule": "copying",
        "has_head": bool(check.has_head and onset["transition"] and not onset["censored"]),
        "has_head_by_damage": bool(
            check.has_head_by_damage and onset["transition"] and not onset["censored"]
        ),
        **training_losses(run),
        "epochs": total / corpus if corpus else math.nan,
        "train_s": meta.get("train_seconds"),
        "trained_on": "; ".join(meta.get("trained_on", [])),  # empty: before it was recorded
        "curve": curve(records),
    }
