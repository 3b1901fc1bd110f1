"""The demo's HTML report: emergence, heads, attention, ablation and configuration of each run.

Every sentence that states a finding is chosen from the numbers by a function of
:mod:`ihprobe.figures.demo_text` (``emergence_text``, ``law_text``, ...), or is the library's one
verdict (:meth:`ihprobe.AblationResult.verdict`), so that it cannot contradict the data; each
number has a "How to read this" entry beside it.

>>> write_demo_report("runs/demo/report.html", config, studies, summary)   # doctest: +SKIP
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ihprobe.causal.choices import analysis
from ihprobe.causal.results import VERDICT_RULE
from ihprobe.dynamics.curves import curve
from ihprobe.figures.ablation import drop_figure, head_effects_figure, head_sets_figure
from ihprobe.figures.attention import attention_figure
from ihprobe.figures.circuit import loss_by_position_figure, positions_text
from ihprobe.figures.demo_text import (
    THRESHOLD,
    compare_note,
    effects_text,
    emergence_text,
    law_text,
    loss_text,
    top_head_text,
)
from ihprobe.figures.emergence import head_strip_figure, trajectory_figure
from ihprobe.figures.fv import fv_note
from ihprobe.figures.heads import head_heatmap
from ihprobe.figures.report import Markup, Section, how_to_read, write_report
from ihprobe.figures.viewer import attention_viewer
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.scores import HeadScores

INTRO = (
    "A tiny {layers}-layer GPT-NeoX (d_model {d_model}, {heads} heads, context C={context}) "
    "trained for {steps} updates of B={batch_size} sequences from the <code>{producer}</code> "
    "producer (rows that turn periodic at a random point). At every "
    "checkpoint ihprobe scores every head on 100 rows of repeated random tokens "
    "<code>[s1..sn, s1..sn]</code>."
)

SUMMARY_COLUMNS = {
    "run": "run",
    "producer": "producer",
    "steps": "updates",
    "ps_start": "max PS, step 0",
    "ps_final": "max PS, final",
    "prefix_matching_chance": "PS chance",
    "ar_start": "AR acc., step 0",
    "ar_final": "AR acc., final",
    "ar_accuracy_chance": "AR chance",
    "induction_loss_final": "induction loss, final",
    "induction_loss_chance": "uniform-guess loss",
    "emergence_updates": "emergence (updates)",
    "law_updates": "law (updates)",
    "induction_heads": "induction heads",
    "verdict": "verdict",
}

SUMMARY_HOWTO = {
    "max PS": "prefix matching of the best head: its attention from each token of the second "
    "copy to the token after that token's first copy (0..1). <i>PS chance</i> is what a "
    "head attending uniformly gets; an induction head scores far above it.",
    "AR acc.": "associative recall accuracy: the share of second-copy tokens the model "
    "predicts exactly. <i>AR chance</i> is 1/V for a vocabulary of V tokens.",
    "induction loss": "the model's cross-entropy (nats) on the second copy; the "
    "<i>uniform-guess loss</i> ln V is what guessing every token equally gives.",
    "emergence": "the first update of the steep segment of a 3-piece fit of max PS against "
    "log(tokens); empty when no transition was detected.",
    "induction heads": f"heads whose prefix matching reaches {THRESHOLD}, the level that counts "
    "as formed.",
    "verdict": "the one verdict on the top heads: their ablation against random heads (AR "
    "accuracy), by the rule stated in the Ablation section below.",
    "law": "the updates Aoyama et al.'s law U = 750,000 / (B^0.37 C^0.62) predicts for this B "
    "and C (fitted to far larger models, see below).",
}

ABLATION_HOWTO = {
    "change": "ablated minus clean value of the metric (signed: for AR accuracy negative is "
    "worse, for losses and ranks positive is worse).",
    "relative_change": "change / clean value (empty for a metric that can be 0 or change sign).",
    "random draws": "sets of the same size drawn from the other heads. <i>layer-matched</i>: "
    "as many per layer as the top set; <i>score-matched</i>: each top head replaced by a head "
    "of similar score stratum, so that the baseline is not only previous-token or sink heads. "
    "<i>distinct sets</i> counts the different sets among the draws (a small model has few).",
    "p": "permutation p-value: (1 + draws at least as harmful as the top set) / (draws + 1); "
    "never below 1 / (draws + 1). <i>p (distinct sets)</i> counts each distinct set once: "
    "with only m distinct sets it cannot go below 1 / (m + 1), the honest floor when a small "
    "model repeats its sets.",
    "index": "load-bearing index: (top harm - mean draw harm) / sd(draw harm), with a bootstrap "
    "95% interval over the draws.",
    "verdict": html.escape(VERDICT_RULE),
}

VIEWER_NOTE = (
    "Every head, interactively: choose a layer and a head, hover a token (or a heatmap row) to "
    "see where it attends."
)


def write_demo_report(path, config, studies: dict, summary: pd.DataFrame) -> Path:
    """Write the demo report for ``studies`` (run name -> ``ihprobe.jobs.demo_summary.Study``)."""
    table = by_run(summary[[c for c in SUMMARY_COLUMNS if c in summary]])
    intro = Markup(INTRO.format(producer=html.escape(config.producer), **_fields(config)))
    sections = [Section("What ran", [intro, table, how_to_read(SUMMARY_HOWTO)])]
    for name, study in studies.items():
        prefix = f"{name}: " if len(studies) > 1 else ""
        sections += [
            _emergence_section(prefix, study),
            _heads_section(prefix, study),
            _attention_section(prefix, study),
            _positions_section(prefix, study),
            _ablation_section(prefix, study),
        ]
    if len(studies) > 1:
        sections.append(_comparison_section(studies))
    sections.append(_config_section(studies))
    return write_report(
        path,
        "ihprobe demo: induction heads, from birth to ablation",
        sections,
        subtitle="Everything on this page was computed by `ihprobe demo`.",
    )


def by_run(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary with one column per run and one row per quantity (named as in
    ``SUMMARY_COLUMNS``), so that it stays narrow however many quantities it shows.

    Example:
        >>> by_run(pd.DataFrame([{"run": "main", "steps": 500, "law_updates": 15787.9}]))
                quantity    main
        0        updates     500
        1  law (updates)  15,788
    """
    shown = summary.rename(columns=SUMMARY_COLUMNS).set_index("run").T
    return shown.map(_cell).rename_axis(index="quantity", columns=None).reset_index()


def _cell(value) -> str:
    if isinstance(value, float):
        if pd.isna(value):
            return ""
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _fields(config) -> dict:
    return {
        k: getattr(config, k)
        for k in ("layers", "d_model", "heads", "context", "steps", "batch_size")
    }


# ----------------------------------------------------------------------------- sections


def _emergence_section(prefix: str, study: dict) -> Section:
    point, s = study.point, study.summary
    fig = trajectory_figure(study.table, point, study.prediction, study.losses)
    return Section(
        f"{prefix}Emergence",
        [
            emergence_text(point),
            law_text(point, study.prediction.updates),
            loss_text(s["induction_loss_final"], s["induction_loss_chance"]),
            fig,
            head_strip_figure(study.table),
        ],
    )


def _heads_section(prefix: str, study: dict) -> Section:
    table = study.table
    steps = sorted(table.step.dropna().unique())
    point = study.point
    chosen = [steps[0], steps[-1]]
    if point.transition and point.step is not None:
        chosen.insert(1, point.step)
    blocks = [
        "Per-head prefix-matching score at the first, the emergence (when one was found) and "
        "the final checkpoint, on one 0..1 colour scale so that checkpoints compare."
    ]
    for step in dict.fromkeys(chosen):
        blocks.append(head_heatmap(HeadScores.from_frame(table[table.step == step])))
    return Section(f"{prefix}Heads at chosen checkpoints", blocks)


def _attention_section(prefix: str, study: dict) -> Section:
    model, s = study.model, study.summary
    layer, head, value = study.scores.top_heads("prefix_matching", k=1)[0]
    n = 16
    tokens = repeated_tokens(model, n=n, batch=1, seed=1)[0]
    text = top_head_text(layer, head, value, s["prefix_matching_chance"], n)
    viewer = attention_viewer(model, tokens, start=(layer, head))
    figure = attention_figure(model, tokens, layer, head)
    blocks = [text, figure, VIEWER_NOTE, viewer, fv_note(model)]  # why no FV score beside PS
    return Section(f"{prefix}Attention of the top head", blocks)


def _positions_section(prefix: str, study) -> Section:
    table = study.positions
    natural = "natural text and " if "natural" in set(table["input"]) else ""
    text = (
        f"Next-token loss at each position of {natural}repeated random tokens, at the first and "
        "last checkpoints and a few between, chosen so that their mean losses are evenly "
        f"spaced (darker is later). {positions_text(table)}"
    )
    return Section(f"{prefix}Loss by token position", [text, loss_by_position_figure(table)])


def _ablation_section(prefix: str, study: dict) -> Section:
    metric = "ar_accuracy"
    main, matched, per_layer = (
        study.ablations[k] for k in ("layer-matched", "score-matched", "per-layer")
    )
    blocks = [
        Markup(f'<p class="verdict"><b>Verdict.</b> {html.escape(str(main.verdict(metric)))}</p>'),
        f"Analysis: {analysis(main.settings, main.by, len(main.random_heads))} (`ihprobe "
        "ablate`'s default, as the demo's summary); the two analyses below can differ.",
        *main.settings.get("notes", []),
        f"Against score-matched draws: {matched.verdict(metric)}",
        effects_text(study.effects, study.scores, metric),
        side_by_side(head_heatmap(study.scores), head_effects_figure(study.effects, metric)),
        drop_figure(main),
        _ablation_table(
            {
                "global, layer-matched": main,
                "global, score-matched": matched,
                "per layer (Bansal et al.)": per_layer,
            }
        ),
        how_to_read(ABLATION_HOWTO),
        "For reference, [B]'s per-layer protocol (the top 2% of every layer, so one head per "
        "layer here, against layer-matched draws): "
        f"{per_layer.verdict(metric)}",
        *(n for n in per_layer.settings.get("notes", []) if "per-layer top set" in n),
        head_sets_figure(per_layer),
    ]
    top = ", ".join(f"L{layer}H{head}" for layer, head in main.top_heads)
    return Section(
        f"{prefix}Ablation: the top prefix-matching heads ({top}) vs random heads", blocks
    )


def _ablation_table(results: dict) -> pd.DataFrame:
    rows = []
    for name, result in results.items():
        for r in result.summary().to_dict("records"):
            if r["metric"] not in ("ar_accuracy", "induction_loss"):
                continue
            rows.append(
                {
                    "setting": name,
                    "metric": r["metric"],
                    "clean": r["clean"],
                    "top": r["top"],
                    "change": r["change"],
                    "relative_change": r["relative_change"],
                    "draws: mean change": r["random_change_mean"],
                    "p": r["p_value"],
                    "distinct sets": r["distinct_sets"],
                    "p (distinct sets)": r["p_distinct"],
                    "index [95%]": f"{r['load_bearing_index']:.2g} "
                    f"[{r['load_bearing_lo']:.2g}, {r['load_bearing_hi']:.2g}]",
                }
            )
    return pd.DataFrame(rows)


def side_by_side(left: go.Figure, right: go.Figure) -> go.Figure:
    """Two single-trace heatmaps as one figure, each keeping its colour bar and title."""
    titles = [f.layout.title.text or "" for f in (left, right)]
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.2, subplot_titles=[_short(t) for t in titles]
    )
    for col, source in enumerate((left, right), start=1):
        trace = source.data[0]
        trace.colorbar.update(x=0.4 if col == 1 else 1.0, len=0.9)
        fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(title_text="head", dtick=1, row=1, col=col)
        fig.update_yaxes(title_text="layer", dtick=1, autorange="reversed", row=1, col=col)
    fig.update_layout(
        height=320,
        template="plotly_white",
        title="Signature (left) and effect of ablating each head alone (right)",
    )
    return fig


def _short(title: str) -> str:
    """A figure's title without the model it names (after " — " or on a ``<sub>`` line)."""
    return title.split("<br><sub>")[0].split(" — ")[0].replace("<br>", " ")


def _comparison_section(studies: dict) -> Section:
    fig = go.Figure()
    for name, study in studies.items():
        c = curve(study.table, "prefix_matching", "max")
        fig.add_scatter(x=c.tokens, y=c.value, name=f"{name}: max PS", mode="lines+markers")
        a = curve(study.table, "anti_induction", "max")
        fig.add_scatter(
            x=a.tokens,
            y=a.value,
            name=f"{name}: max anti-induction ([B]'s score)",
            mode="lines",
            line={"dash": "dot"},
        )
    fig.update_xaxes(type="log", title_text="training tokens")
    fig.update_yaxes(title_text="score (0..1)", range=[0, 1])
    fig.update_layout(title="Natural-only vs Bi-Induct at matched compute", template="plotly_white")
    text = (
        "Sabry & Belz compare natural-only training with Bi-Induct (forward and backward copy "
        "snippets written over the same text, annealed, at matched tokens per update). They "
        "report forward induction learned, backward anti-induction (dotted; no content match "
        "can raise it in a causal model, docs/science.md) near zero, and smaller ablation drops "
        "in Bi-Induct models (redundant rather than load-bearing heads)."
    )
    note = compare_note(pd.DataFrame([study.summary for study in studies.values()]))
    said = [Markup(f"<p><b>At this budget.</b> {html.escape(note)}</p>")] if note else []
    blocks = [text, *said]
    return Section("Natural vs Bi-Induct", [*blocks, fig])


def _config_section(studies: dict) -> Section:
    blocks = []
    for name, study in studies.items():
        run_json = Path(study.run) / "run.json"
        saved = json.loads(run_json.read_text()) if run_json.is_file() else {}
        shown = html.escape(json.dumps(saved.get("config", saved), indent=2))
        blocks.append(Markup(f"<h3>{html.escape(name)}</h3><pre>{shown}</pre>"))
    return Section("Configuration", blocks)
