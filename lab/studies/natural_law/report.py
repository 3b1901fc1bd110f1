"""The natural-text grid's results file: the declared design, every run, the fit, the figure.

>>> frame = pd.DataFrame({"cell": ["B1-C64"], "seed": [0], "status": ["pending"]})
>>> text = report(frame, ["Runs: x"], figure=None)
>>> "## Declared design" in text and "pending" in text
True
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lab.studies.atomic import write_text
from lab.studies.natural_law import cells, claims, posthoc, sensitivity
from lab.studies.natural_law.figure import onset_svg

FIGURE = Path(__file__).resolve().parent / "onsets.svg"
COMMAND = "python -m lab.studies {} --cell {} --seed {}"

DECLARED = [
    "## Declared design (written before the first run)",
    "",
    "- Question: does [A]'s law, U = 750k / (B^0.37 C^0.62) updates, fitted on [A]'s natural "
    "text, hold for induction heads forming from natural text here?",
    "- Regime: the documentation corpus (`make corpus`, 16.8M training tokens under a 512-id "
    "BPE); GPT-NeoX 2 layers x 4 heads, d_model 128 with MLPs; AdamW, constant learning rate "
    "3e-3 after a 1% warm-up, grad clip 1; live probes at 32 evenly spaced checkpoints.",
    f"- Grid: B in {', '.join(map(str, cells.BATCH_SIZES))} x C in "
    f"{', '.join(map(str, cells.CONTEXTS))} ({len(cells.CPU_CELLS)} cells), one seed per cell "
    f"first, cheapest cells first; budget {cells.LAW_X:g}x the law's updates per run.",
    "- Onset: the change point of the live probes' max prefix matching against log tokens "
    "(the start of the steepest segment of a 3-segment fit; the rise counted from that start to "
    "the highest fitted level after it must reach 0.1 and persist). No transition: censored at "
    "the last probe; a rise starting in the last interval: censored at its point.",
    "- Has an induction head: a placed onset and, on the final checkpoint, prefix matching >= "
    "0.1 at repeat lengths 10, 25 and 50, a repeated half >= 0.5 nats below the first, and "
    ">= 0.1 nats lost when that head alone is zero-ablated (`ihprobe.head_check`).",
    "- Fit: log10 U = a - b log10 B - c log10 C by censored (Tobit) regression over every run, "
    "t-interval on runs - 3 df; a cell-clustered sandwich beside it as a check; a lack-of-fit "
    "test against a free mean per cell once cells have two seeds; r in tokens as [A] reports.",
    f"- Claims: b {claims.CLAIMS['b'].says}, c {claims.CLAIMS['c'].says}; 'agrees' only when "
    "the whole interval lies inside the margin, 'disagrees' only when wholly outside, else "
    f"'inconclusive at this scale'; pending until {claims.MIN_CELLS} cells have run.",
    "",
]
# what was added to the design after the first run, each saying whether it came before or after
# the result it could move
AMENDED = [
    "## Amendments (dated; each says whether it came before or after the result it could move)",
    "",
    "- Before the results it could move (any of their runs): the wide corners for a lent GPU, "
    "B 32-128 at C 64-1024 and "
    f"C = 1024 at B 1-16 ({len(cells.GPU_CELLS)} cells, cheapest first), on the same recipe, "
    "budget and rules; cells past 4 epochs of the corpus are named below the runs.",
    *claims.AMENDMENTS,
    "",
]

COLUMNS = [
    "cell",
    "seed",
    "B",
    "C",
    "steps",
    "tokens_M",
    "epochs",
    "onset",
    "max_ps",
    "has_head",
    "head",
    "ps_n10",
    "ps_n25",
    "ps_n50",
    "loss_drop",
    "ablation_cost",
    "copying_matched",
    "rule",
    "loss_final",
    "loss_min",
    "train_min",
    "device",
    "command",
]


def run_table(frame: pd.DataFrame, study: str = "natural_law") -> pd.DataFrame:
    """One row per cell and seed, numbers rounded for reading; pending rows say so."""
    rows = []
    for r in frame.to_dict("records"):
        row = {
            "cell": r["cell"],
            "seed": r["seed"],
            "command": f"`{COMMAND.format(study, r['cell'], r['seed'])}`",
        }
        if r.get("status") != "done":
            rows.append({**row, "onset": "pending"})
            continue
        onset = f"{'>= ' if r['censored'] else ''}{r['updates']:,.0f}"
        rows.append(
            {
                **row,
                "B": str(int(r["B"])),
                "C": str(int(r["C"])),
                "steps": str(int(r["steps"])),
                "tokens_M": f"{r['tokens_M']:.1f}",
                "epochs": f"{r['epochs']:.2f}",
                "onset": onset,
                "max_ps": f"{r['max_ps']:.3f}",
                "has_head": "yes" if bool(r["has_head"]) else "no",
                "head": r["head"],
                "ps_n10": f"{r['ps_n10']:.2f}",
                "ps_n25": f"{r['ps_n25']:.2f}",
                "ps_n50": f"{r['ps_n50']:.2f}" if pd.notna(r.get("ps_n50")) else "-",
                "loss_drop": f"{r['loss_drop']:.2f}",
                "ablation_cost": f"{r['ablation_cost']:.2f}",
                "copying_matched": _number(r.get("copying_cost_matched")),
                "rule": head_rule(r),
                "loss_final": _number(r.get("train_loss_final")),
                "loss_min": _number(r.get("train_loss_min")),
                "train_min": f"{r['train_s'] / 60:.0f}" if pd.notna(r.get("train_s")) else "",
                "device": r["trained_on"] if isinstance(r.get("trained_on"), str) else "",
            }
        )
    return pd.DataFrame(rows).reindex(columns=COLUMNS).fillna("")


def _number(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and pd.notna(value) else ""


def head_rule(row: dict) -> str:
    """The head check's rule that judged a row: ``copying`` (amended 2026-12-06) or ``damage``
    (the superseded third part: every row measured before, whose checkpoints are gone).

    >>> head_rule({"head_rule": "copying"}), head_rule({"head_rule": float("nan")}), head_rule({})
    ('copying', 'damage', 'damage')
    """
    rule = row.get("head_rule")
    return rule if isinstance(rule, str) and rule else "damage"


def rule_line(done: pd.DataFrame) -> list[str]:
    """Which head-check rule judged the finished runs, and where the two rules part.

    >>> "All 1 finished runs were judged by the superseded" in rule_line(
    ...     pd.DataFrame({"cell": ["B1-C64"], "seed": [0]}))[0]
    True
    """
    if not len(done):
        return []
    rules = [head_rule(r) for r in done.to_dict("records")]
    old, new = rules.count("damage"), rules.count("copying")
    text = (
        "Head check: the third part was amended on 2026-12-06 from 'ablating the head raises "
        "the second-half loss by 0.1 nats' (damage, which runs without a head also pass) to "
        "'ablating it lowers the copy advantage by 0.1 nats more than its layer's other heads' "
        "(copying; `ihprobe/causal/head_check.py`). "
    )
    if not new:
        text += (
            f"All {old} finished runs were judged by the superseded damage rule: their "
            "checkpoints are gone, so `has_head` here is the old rule's verdict."
        )
    else:
        parted = [
            sensitivity.label(r["cell"], int(r["seed"]))
            for r in done.to_dict("records")
            if head_rule(r) == "copying" and bool(r["has_head"]) != bool(r["has_head_by_damage"])
        ]
        text += (
            f"{old} finished run(s) judged by the superseded damage rule (checkpoints gone), "
            f"{new} by the copying rule, the damage rule's verdict kept beside it "
            f"(`has_head_by_damage`): "
            + (f"they differ for {', '.join(parted)}." if parted else "the two agree on every one.")
        )
    return [text, ""]


def heads_line(done: pd.DataFrame) -> list[str]:
    """How many finished runs formed a head (``has_head``), and which (none finished: no line).

    >>> heads_line(pd.DataFrame({"cell": ["B1-C64", "B2-C64"], "seed": [0, 1],
    ...                          "has_head": [True, False]}))
    ['1 of 2 finished runs formed a head (`has_head`): B1-C64.', '']
    """
    if not len(done):
        return []
    with_head = done[done.has_head.astype(bool)]
    named = ", ".join(sensitivity.label(r.cell, int(r.seed)) for r in with_head.itertuples())
    return [
        f"{len(with_head)} of {len(done)} finished runs formed a head (`has_head`)"
        f"{': ' + named if named else ''}.",
        "",
    ]


def _markdown(frame: pd.DataFrame) -> list[str]:
    return [
        "| " + " | ".join(frame.columns) + " |",
        "|" + " --- |" * len(frame.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)),
    ]


# how this grid's runs are trained: one at a time beside other work (the shared header says two)
SHARED = "two processes at a time (one per core, `OMP_NUM_THREADS=1`)"
OURS = "one process at a time (`OMP_NUM_THREADS=1`) on a machine shared with other work"


def report(frame: pd.DataFrame, provenance: list[str], figure: Path | None = FIGURE) -> str:
    """The results file; also writes the onset figure to ``figure`` (None: not written)."""
    provenance = [line.replace(SHARED, OURS) for line in provenance]
    done = frame[frame.status == "done"] if "status" in frame else frame.iloc[:0]
    lines = [
        "# [A]'s law on natural text: the (B, C) grid",
        "",
        *provenance,
        "",
        *DECLARED,
        *AMENDED,
        "## Runs",
        "",
        f"{len(done)} of {len(frame)} runs finished. `onset`: updates at the onset (`>=`: "
        "censored, the bound). `epochs`: passes over the corpus's training tokens. `ps_n50`: "
        "`-` where 2 x 50 positions do not fit the context. "
        "`train_min`: wall minutes of training on the machine that ran it (shared; an upper "
        "bound for one idle core). `device`: where it trained, as the run recorded it (empty: "
        "trained before runs recorded it, on this project's 2-core CPU machine). `command`: "
        "what trains the run, or reuses it once finished (the B = 4, C = 256 runs are shared "
        "with the size arm, whose command makes the same run in the same folder).",
        "",
        *_markdown(run_table(frame)),
        "",
        *heads_line(done),
        *rule_line(done),
    ]
    many = done[done.get("epochs", pd.Series(dtype=float)).astype(float) > 4] if len(done) else done
    if len(many):
        lines += [
            f"- Cells past 4 epochs of the corpus: {', '.join(many.cell)} (the corpus repeats "
            "there; a larger corpus would remove it).",
            "",
        ]
    found = sensitivity.readings(frame) if len(done) else []
    notes = sensitivity.fragility(frame, found)
    lines += ["## Fit and verdicts", "", *claims.fit_lines(frame, notes), ""]
    if figure is not None and len(done):
        runs = claims.runs_of(frame)
        predicted = 10 ** claims.predicted_tokens(runs)
        points = [
            (float(p), r.tokens, bool(r.censored))
            for p, r in zip(predicted, runs.itertuples(), strict=True)
        ]
        write_text(figure, onset_svg(points, "natural-text grid: onsets"))
        lines += [
            f"![observed against predicted onsets]({figure.name}) (dots: placed; arrows: "
            "censored, the onset lies above)",
            "",
        ]
    lines += sensitivity.lines(frame)
    lines += posthoc.lines()
    if len(done):
        lines += [
            "## The live probes, run by run",
            "",
            "Max prefix matching (AR accuracy) at each live probe, by millions of tokens.",
            "",
            *(f"- `{r.cell}` seed {r.seed}: {r.curve}" for r in done.itertuples()),
            "",
        ]
    return "\n".join(lines)
