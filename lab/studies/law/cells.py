"""The law grid's cells, as data: name -> grid, producer, options, B, C and what else differs
from the base run (``run.config_of`` turns one into a TrainConfig). What each grid asks:
the docstring of :mod:`studies.law.run`.

>>> len(cells()), cells()["sn-B16-C128"]["B"], budget(16, 128)
(30, 16, 8800)
"""

from __future__ import annotations

from lab.studies.law.regime import SEMI_NATURAL

BATCHES, CONTEXTS, SEEDS, SIZE_AT = (8, 16, 32), (32, 64, 128), (0, 1, 2, 3, 4), (8, 64)
FIXED_B, FIXED_CONTEXTS, FIXED_BUDGET = 8, (64, 128, 256), 12000
EXTEND = 2  # --extend-censored reruns a cell with a censored seed at this many times its budget
BUDGET_AT_REFERENCE = (16, 128, 4400)  # (B, C, updates); other cells scale by (B C)^-0.9
LR = 3e-3  # AdamW, constant after a 1% warm-up unless the cell says otherwise
WARMUP_TOKENS = 1_000_000  # [A]: 10M, under 1/6 of its earliest point; here 1/10-1/3 of them


def fixed_structure(context: int) -> dict:
    """Repeats whose period and tail length are absolute, so C only adds text in front."""
    return {"period": [8, 16], "start": [context - 48, context - 32], "vocab_size": 300}


def budget(B: int, C: int) -> int:
    """Updates for a cell: the reference budget scaled by (B C)^-0.9, in hundreds, twice that
    at C = 128.

    >>> budget(16, 128), budget(8, 32)
    (8800, 28600)
    """
    B0, C0, updates = BUDGET_AT_REFERENCE
    scaled = int(round(updates * (B0 * C0 / (B * C)) ** 0.9 / 100) * 100)
    return scaled * (2 if C == 128 else 1)


def cells() -> dict[str, dict]:
    """Cell name -> its grid, producer, options and shape (the grid of issue 15)."""
    out = {}
    for B in BATCHES:
        for C in CONTEXTS:
            out[f"sn-B{B}-C{C}"] = {
                "grid": "semi-natural",
                "producer": "semi-natural",
                "options": SEMI_NATURAL,
                "B": B,
                "C": C,
            }
    for C in FIXED_CONTEXTS:
        out[f"fx-B{FIXED_B}-C{C}"] = {
            "grid": "fixed-structure",
            "producer": "repeats",
            "options": fixed_structure(C),
            "B": FIXED_B,
            "C": C,
            "steps": FIXED_BUDGET,
        }
    base = {"producer": "semi-natural", "options": SEMI_NATURAL, "B": SIZE_AT[0], "C": SIZE_AT[1]}
    out["size-d128"] = {**base, "grid": "size", "d_model": 128}
    out["size-L3"] = {**base, "grid": "size", "layers": 3}
    out["sched-cosine"] = {**base, "grid": "schedule", "schedule": "cosine"}
    return {**out, **EXPERIMENTS}


def experiments() -> dict[str, dict]:
    """The cells of issue 24 that ask where the exponents come from (see the docstring)."""
    sn = {"producer": "semi-natural", "options": SEMI_NATURAL}
    out = {
        f"bs-B{B}-C64": {**sn, "grid": "batch", "B": B, "C": 64, "steps": 4400} for B in (64, 128)
    }
    for lr, tag in ((1e-3, "1e-3"), (3e-4, "3e-4")):
        for B in (8, 32):
            out[f"lr{tag}-B{B}-C64"] = {
                **sn,
                "grid": "learning-rate",
                "B": B,
                "C": 64,
                "lr": lr,
                "steps": 3 * budget(B, 64),
            }
    for B in (8, 32):
        for C in (32, 128):
            steps = budget(B, C) * (EXTEND if C == 128 else 1)  # where the sn reruns ended
            out[f"wu-B{B}-C{C}"] = {
                **sn,
                "grid": "warm-up",
                "B": B,
                "C": C,
                "steps": steps,
                "warmup": WARMUP_TOKENS / (B * C * steps),
            }
    for C in (32, 64, 128, 256):
        out[f"nr-B8-C{C}"] = {
            "grid": "natural-repetition",
            "producer": "semi-natural",
            "options": {**SEMI_NATURAL, "repetition": "natural"},
            "B": 8,
            "C": C,
            "steps": budget(8, min(C, 128)),
        }
    out["iid-B16-C64"] = {
        "grid": "control",
        "producer": "iid",
        "B": 16,
        "C": 64,
        "options": {"vocab_size": 300, "marginal": "zipf"},
    }
    return out


EXPERIMENTS = experiments()
