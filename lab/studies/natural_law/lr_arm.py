"""Size or learning rate? The d_model 256 arm again at lr 1e-3 (added 2026-12-06, post hoc).

Every size arm ran at the grid's lr 3e-3, where all five d_model 256 seeds stayed at chance,
while both d_model 256 pilots at lr 1e-3 rose: the learning rate explains the arm as well as
size does. This arm (B = 4, C = 256, d_model 256, lr 1e-3, the size arm's budget, 5 seeds) was
declared after the size verdicts, so it is a labelled post hoc arm. Its rule, declared before
its first run: the share of seeds with a head (Fisher's exact test, 5%) is compared with
d_model 256 at lr 3e-3 and with d_model 128 at lr 3e-3:

- differs from d_model 256 at 3e-3 and not from d_model 128: **the learning rate** explains
  d_model 256's missing heads at this scale;
- differs from d_model 128 and not from d_model 256 at 3e-3: **size** (at both rates tried);
- anything else: inconclusive at this scale; below 5 finished seeds: pending.

The lr 3e-3 arms were judged by the head check's superseded damage rule (their checkpoints are
gone), so this arm's seeds are counted by that rule's verdict too (``has_head_by_damage``), the
amended copying rule's count printed beside it; where that count gives another verdict, the
same line says so.

>>> import pandas as pd
>>> def runs(arm, heads, n=5):
...     return [{"cell": arm, "has_head": i < heads} for i in range(n)]
>>> frame = pd.DataFrame(runs(BASE, 4) + runs(D256, 0) + runs(ARM, 5))
>>> lr_verdict(frame)[0]
'the learning rate'
>>> lr_verdict(pd.DataFrame(runs(BASE, 5) + runs(D256, 0) + runs(ARM, 0)))[0]
'size'
>>> lr_verdict(pd.DataFrame(runs(BASE, 4) + runs(D256, 0) + runs(ARM, 2)))[0]
'inconclusive at this scale'
>>> lr_verdict(pd.DataFrame(runs(BASE, 4) + runs(D256, 0) + runs(ARM, 2, n=3)))[0]
'pending'
>>> mixed = frame.assign(has_head_by_damage=[None] * 10 + [False] * 5)  # damage rule: 0 of 5
>>> said, why = lr_verdict(mixed)
>>> print(said, "|", why.split("; ")[1])  # doctest: +NORMALIZE_WHITESPACE
size | by the amended copying rule, 5 of 5 at lr 1e-3, which gives **the learning rate**
instead (p = 0.0079 and 1): this verdict turns on the head check's rule
>>> lr_verdict(frame.assign(has_head_by_damage=[None] * 10 + [True] * 5))[1].split("; ")[1]
'by the amended copying rule, 5 of 5 at lr 1e-3'
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

BASE, D256 = "B4-C256", "B4-C256-d256"
ARM = f"{D256}-lr1e-3"
SEEDS, ALPHA = 5, 0.05
FIELDS = {"d_model": 256, "lr": 1e-3}


def _share(runs: pd.DataFrame, arm: str, rule: str = "damage") -> tuple[int, int]:
    """Seeds with a head and finished seeds; by the damage rule where a row has both rules'
    (``rule="damage"``), or by the row's own ``has_head`` (``rule="copying"``)."""
    rows = runs[runs.cell == arm]
    if rule == "damage" and "has_head_by_damage" in rows:
        both = rows.has_head_by_damage.notna()
        heads = rows.has_head_by_damage.where(both, rows.has_head).astype(bool)
    else:
        heads = rows.has_head.astype(bool)
    return int(heads.sum()), len(heads)


def _fisher(a: tuple[int, int], b: tuple[int, int]) -> float:
    table = [[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]]
    return float(stats.fisher_exact(table)[1])


def _judge(arm: tuple[int, int], d256: tuple[int, int], base: tuple[int, int]) -> str:
    """The declared rule's verdict on three shares (seeds with a head, finished seeds)."""
    p_d256, p_base = _fisher(arm, d256), _fisher(arm, base)
    if p_d256 < ALPHA <= p_base:
        return "the learning rate"
    if p_base < ALPHA <= p_d256:
        return "size"
    return "inconclusive at this scale"


def lr_verdict(runs: pd.DataFrame) -> tuple[str, str]:
    """(verdict, the numbers behind it) over finished runs (``cell``, ``has_head``). Where the
    arm's seeds also carry the amended copying rule's verdict and its count gives another
    verdict, the numbers say so: that reading moves the verdict."""
    arm, d256, base = (_share(runs, a) for a in (ARM, D256, BASE))
    if arm[1] < SEEDS or d256[1] < SEEDS or base[1] < SEEDS:
        return "pending", f"{arm[1]} of {SEEDS} seeds of the lr 1e-3 arm finished"
    said = _judge(arm, d256, base)
    why = (
        f"by the damage rule, {arm[0]} of {arm[1]} seeds with a head at lr 1e-3, against "
        f"{d256[0]} of {d256[1]} "
        f"for d_model 256 at 3e-3 (Fisher p = {_fisher(arm, d256):.2g}) and {base[0]} of "
        f"{base[1]} for d_model 128 at 3e-3 (p = {_fisher(arm, base):.2g})"
    )
    if "has_head_by_damage" in runs:
        copying = _share(runs, ARM, "copying")
        why += f"; by the amended copying rule, {copying[0]} of {copying[1]} at lr 1e-3"
        other = _judge(copying, d256, base)
        if other != said:
            why += (
                f", which gives **{other}** instead (p = {_fisher(copying, d256):.2g} and "
                f"{_fisher(copying, base):.2g}): this verdict turns on the head check's rule"
            )
    return said, why


def lines(runs: pd.DataFrame) -> list[str]:
    """The arm's section of the size results file."""
    said, why = lr_verdict(runs)
    return [
        "## Size or learning rate? (post hoc arm, added 2026-12-06)",
        "",
        f"- d_model 256 at lr 1e-3 (`{ARM}`; B = 4, C = 256, the size arm's budget), declared "
        "after the size verdicts above and before its first run: its share of seeds with a head "
        "against d_model 256 and d_model 128 at lr 3e-3 (Fisher's exact test, 5%).",
        f"- Verdict: **{said}** ({why}). Only the regime named: 2 layers, B = 4, C = 256, "
        "the documentation corpus; two learning rates.",
    ]
