"""Figures say what they show: loss by position on a linear axis with the copies marked and a
sentence from its own numbers; fixed colour scales for bounded scores (chance noise stays
pale); point names that never overlap; titles that fit their PNG; tables that fit 1024 px."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
import torch

from ihprobe.causal.results import AblationResult, HeadEffects
from ihprobe.circuit.patching import PatchResult
from ihprobe.figures.ablation import head_effects_figure, head_sets_figure, write_ablation_report
from ihprobe.figures.circuit import (
    attribution_scatter,
    composition_figure,
    loss_by_position_figure,
    patch_figure,
    positions_text,
    spaced_labels,
)
from ihprobe.figures.heads import TITLE_CHAR_PX, head_heatmap
from ihprobe.figures.report import Section, write_report
from ihprobe.io.provenance import Provenance
from ihprobe.probes.composition import Composition
from ihprobe.probes.scores import HeadScores
from tests.browser import render, screenshot

HALF = 8  # repeated rows of 2 * 8 tokens predict positions 1..15; the second copy starts at 8


def _positions(inputs=("repeated",)) -> pd.DataFrame:
    """Two checkpoints: the second copy's loss falls 4.2 -> 0.3 while the first rises to 4.6."""
    rows = []
    for step, first, second in ((0, 4.2, 4.2), (500, 4.6, 0.3)):
        for name in inputs:
            for position in range(1, 2 * HALF):
                loss = second if name == "repeated" and position >= HALF else first
                rows.append(
                    {
                        "model": "m",
                        "revision": None,
                        "step": step,
                        "tokens": step * 64,
                        "input": name,
                        "position": position,
                        "loss": loss,
                    }
                )
    return pd.DataFrame(rows)


def test_loss_by_position_is_linear_with_the_copies_marked_and_no_missing_panel():
    fig = loss_by_position_figure(_positions())
    assert fig.layout.title.text.endswith("(repeated tokens)")  # one panel, named in the title
    assert fig.layout.xaxis.type in (None, "linear")  # the second half is not squeezed
    assert [s.x0 for s in fig.layout.shapes] == [HALF - 0.5]  # the line between the copies
    assert {"first copy", "second copy"} <= {a.text for a in fig.layout.annotations}
    both = loss_by_position_figure(_positions(("natural", "repeated")))
    assert {a.text for a in both.layout.annotations} >= {"natural", "repeated"}
    assert both.layout.xaxis2.type in (None, "linear") and len(both.data) == 4


def test_the_positions_sentence_reads_the_numbers_it_describes():
    text = positions_text(_positions())
    assert "second copy's mean loss goes from 4.20 to 0.30" in text
    assert "first copy's from 4.20 to 4.60" in text  # it rose: the text does not say "stays"


def test_bounded_scores_keep_fixed_scales_so_chance_noise_stays_pale():
    noise = torch.tensor([[0.02140, 0.02144], [0.02141, 0.02142]])
    provenance = Provenance("random-init")
    scores = HeadScores(head={"k_composition": noise}, model={}, provenance=provenance)
    k = head_heatmap(scores, "k_composition")
    assert (k.data[0].zmin, k.data[0].zmax) == (-1.0, 1.0)
    result = AblationResult(
        provenance,
        "prefix_matching",
        noise,
        [(0, 1)],
        [[(1, 0)]],
        {"ar_accuracy": torch.tensor([0.1, 0.1, 0.1])},
    )
    sets = head_sets_figure(result).data[0]
    assert (sets.zmin, sets.zmax) == (0.0, 1.0)
    raw = torch.full((2, 2, 2, 2), math.nan)
    raw[0, :, 1, :] = 0.30 + 0.001 * torch.arange(4.0).reshape(2, 2)  # within 1 SD of chance
    composition = composition_figure(Composition("k", raw, baseline=0.3, baseline_sd=0.01))
    assert (composition.data[0].zmin, composition.data[0].zmax) == (-4.0, 4.0)  # the noise band
    patch = PatchResult("head", torch.tensor([[0.50, 0.51], [0.52, 0.53]]), 1.0, 0.5)
    assert (patch_figure(patch).data[0].zmin, patch_figure(patch).data[0].zmax) == (-1.0, 1.0)


def test_spaced_labels_name_outstanding_points_and_skip_crowded_ones():
    x = [0.0, 0.01, 0.02, 0.9, 0.5]
    y = [0.0, 0.01, 0.0, 0.85, 0.52]
    names = spaced_labels(x, y, ["a", "b", "c", "d", "e"], span=1.0)
    assert names[3] == "d" and names[4] == "e" and names[:3].count("") == 2


def test_titles_fit_the_width_of_their_png():
    effects = HeadEffects(
        Provenance("runs/demo/main", None, 500, 1_024_000),
        (2, 4),
        {"ar_accuracy": torch.linspace(0.9, 0.1, 9)},
    )
    fig = head_effects_figure(effects, "ar_accuracy")
    lines = re.sub(r"<sub>.*?</sub>", "", fig.layout.title.text).split("<br>")
    assert len(lines) >= 2  # the 420 px figure wraps its title
    assert all(len(line) * TITLE_CHAR_PX <= fig.layout.width - 60 for line in lines)


_MEASURE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const boxes = [...document.querySelectorAll('.textpoint text')]
    .filter(t => t.textContent).map(t => t.getBoundingClientRect());
  let overlaps = 0;
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
    if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlaps++;
  }));
  const cut = [...document.querySelectorAll('.main-svg')].filter(svg => {
    const title = svg.parentNode.querySelector('.gtitle');
    return title && title.getBoundingClientRect().right > svg.getBoundingClientRect().right;
  }).length;
  const wide = [...document.querySelectorAll('.table')].filter(t => t.scrollWidth > t.clientWidth);
  const stuck = wide.filter(t => !['auto', 'scroll'].includes(getComputedStyle(t).overflowX));
  document.documentElement.setAttribute('data-measure', JSON.stringify(
    {names: boxes.length, overlaps, cut, tables: wide.length, unscrollable: stuck.length}));
}, 800));
</script>"""


@pytest.mark.slow
def test_in_chromium_names_do_not_overlap_titles_are_whole_and_tables_fit_1024(tmp_path):
    # 32 heads, most crowded near the origin: each used to carry its name
    gen = torch.Generator().manual_seed(0)
    activation = torch.rand(4, 8, generator=gen) * 0.05
    activation[1, 2], activation[2, 5] = 0.9, 0.6
    attribution = activation + torch.rand(4, 8, generator=gen) * 0.02
    scatter = attribution_scatter(
        PatchResult("head", activation, 1.0, 0.0),
        PatchResult("head", attribution, 1.0, 0.0, "attribution"),
    )
    effects = HeadEffects(
        Provenance("runs/demo/main", None, 500, 1_024_000),
        (2, 4),
        {"ar_accuracy": torch.linspace(0.9, 0.1, 9)},
    )
    page = tmp_path / "figures.html"
    # figures at their own widths, as a notebook's PNG draws them (not fitted to the page)
    body = "".join(
        f.to_html(full_html=False, include_plotlyjs=i == 0)
        for i, f in enumerate([scatter, head_effects_figure(effects, "ar_accuracy")])
    )
    page.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}"
        f"{_MEASURE}</body></html>",
        encoding="utf-8",
    )
    measured = _measure(page, width=1024)
    assert measured["names"] >= 2 and measured["overlaps"] == 0 and measured["cut"] == 0
    screenshot(page, "figures-labels-titles.png", height=1000)
    # a report whose ablation table has every statistic of three metrics: no hidden columns
    values = {
        m: torch.tensor([0.5, 0.9, 0.4, 0.6, 0.55])
        for m in ("ar_accuracy", "induction_loss", "ar_mean_rank")
    }
    result = AblationResult(
        Provenance("m"),
        "prefix_matching",
        torch.full((2, 4), 0.5),
        [(1, 2)],
        [[(1, 0)], [(1, 1)], [(1, 3)]],
        values,
    )
    report = write_ablation_report(tmp_path / "ablation.html", [result])
    report.write_text(report.read_text().replace("</body>", _MEASURE + "</body>"))
    measured = _measure(report, width=1024)
    assert measured["tables"] == 0
    wide = pd.DataFrame([{f"a long column name {i}": 123456.789 * i for i in range(24)}])
    table = write_report(tmp_path / "wide.html", "wide", [Section("t", [wide])])
    table.write_text(table.read_text().replace("</body>", _MEASURE + "</body>"))
    measured = _measure(table, width=1024)  # too wide to fit: it scrolls inside the page
    assert measured["tables"] == 1 and measured["unscrollable"] == 0
    assert render(table, 1024).overflow <= 0


def _measure(page, width: int) -> dict:
    rendered = render(page, width=width)
    assert rendered.errors == []
    found = re.search(r"data-measure=\"([^\"]*)\"", rendered.dom)
    return json.loads(found.group(1).replace("&quot;", '"'))
