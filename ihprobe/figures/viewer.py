"""An interactive attention viewer in one self-contained HTML fragment (no network, no plotly).

Choose a layer and a head; hover a token to see where it attends (each earlier token is shaded
by its attention weight), or hover a row of the pattern heatmap beside it. The patterns and
tokens are embedded as JSON with a few lines of plain JavaScript, so the fragment works inside
ihprobe's HTML reports, in a notebook and offline. Every change (layer, head, hovered token)
redraws the heatmap from a cleared canvas.

CircuitsVis is not used: its ``render`` checks for internet access by requesting google.com
and loads its JavaScript from unpkg, and its bundled script is 1.3 MB.

``attention_viewer`` returns an :class:`AttentionViewer`: a notebook cell ending in it shows
the viewer (``_repr_html_``); ``str()`` is the fragment a report embeds, and ``.html`` is a whole
page (``Path("v.html").write_text(viewer.html)``, or ``viewer.save("v.html")``). It opens on the
model's top head by prefix matching unless ``start`` names another, and the pattern's axes are
labelled (rows: query positions, columns: key positions). Given ``fv`` (an ``FVResult`` or its
frame, computed by the caller), the head picker shows each head's FV score beside its
prefix-matching score (``head 1 · PS 0.97 · FV +0.598``).

>>> viewer = attention_viewer(model, tokens[0])                             # doctest: +SKIP
>>> viewer       # as a cell's last line, the notebook shows the viewer      # doctest: +SKIP
>>> viewer.html.startswith("<!doctype html>")                               # doctest: +SKIP
True
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
from collections.abc import Sequence

import torch
from jaxtyping import Int

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.figures.attention import attention_patterns, token_labels
from ihprobe.figures.fv import fv_grid
from ihprobe.figures.report import Markup
from ihprobe.io.any_model import as_model
from ihprobe.probes.battery import scan

_STYLE = """
.ihp-viewer { font-family: system-ui, sans-serif; font-size: .85rem; margin: .8rem 0; }
.ihp-viewer select { margin-right: 1rem; }
.ihp-body { display: flex; gap: 1.2rem; align-items: flex-start; margin-top: .5rem; }
.ihp-tokens { max-width: 620px; line-height: 1.9; }
.ihp-tok { display: inline-block; padding: 1px 3px; margin: 1px; border-radius: 3px;
           font-family: ui-monospace, monospace; white-space: pre; }
.ihp-tok.ihp-query { outline: 2px solid #d62728; }
.ihp-info { color: #555; margin-left: .5rem; }
.ihp-matrix { display: grid; grid-template-columns: auto auto; align-items: center; }
.ihp-xlabel { grid-column: 2; text-align: center; color: #333; margin-bottom: .2rem; }
.ihp-ylabel { writing-mode: vertical-rl; color: #333; margin-right: .3rem; text-align: center; }
"""

_SCRIPT = """
(function () {
  const root = document.getElementById(%(id)s);
  const data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const layerSel = root.querySelector('.ihp-layer'), headSel = root.querySelector('.ihp-head');
  const box = root.querySelector('.ihp-tokens'), info = root.querySelector('.ihp-info');
  const canvas = root.querySelector('canvas'), ctx = canvas.getContext('2d');
  const n = data.tokens.length, cell = Math.max(2, Math.floor(320 / n));
  canvas.width = canvas.height = cell * n;
  data.layers.forEach((l, i) => layerSel.add(new Option('layer ' + l, i)));
  data.heads.forEach((h, i) => headSel.add(new Option('head ' + h, i)));
  function label() {  // each head's scores in this layer beside its number, as plain text
    if (!data.labels) return;
    data.labels[layerSel.value].forEach((t, i) => { headSel.options[i].text = t; });
  }
  const spans = data.tokens.map((t, i) => {
    const s = document.createElement('span');
    s.className = 'ihp-tok'; s.textContent = t; s.title = 'position ' + i;
    s.addEventListener('mouseenter', () => show(i));
    box.appendChild(s); return s;
  });
  let query = n - 1;
  const pattern = () => data.patterns[layerSel.value][headSel.value];
  function shade(w) { return 'rgba(31, 119, 180, ' + Math.min(1, w).toFixed(3) + ')'; }
  function draw() {  // from scratch: the previous head and outline must not show through
    const p = pattern();
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = '#ffffff'; ctx.fillRect(0, 0, canvas.width, canvas.height);
    for (let q = 0; q < n; q++) for (let k = 0; k < n; k++) {
      ctx.fillStyle = k <= q ? shade(p[q][k]) : '#fafafa';
      ctx.fillRect(k * cell, q * cell, cell, cell);
    }
    ctx.strokeStyle = '#d62728'; ctx.strokeRect(0, query * cell, n * cell, cell);
  }
  function show(q) {
    query = q;
    const row = pattern()[q];
    spans.forEach((s, k) => {
      s.style.background = k <= q ? shade(row[k]) : 'transparent';
      s.classList.toggle('ihp-query', k === q);
    });
    const top = row.indexOf(Math.max(...row));
    info.textContent = 'query ' + q + ' ' + data.tokens[q] + ' attends most to ' + top + ' ' +
      data.tokens[top] + ' (' + row[top].toFixed(2) + ')';
    draw();
  }
  canvas.addEventListener('mousemove', e => {
    const q = Math.floor(e.offsetY / cell); if (q >= 0 && q < n) show(q);
  });
  layerSel.addEventListener('change', () => { label(); show(query); });
  headSel.addEventListener('change', () => show(query));
  layerSel.value = data.start[0]; headSel.value = data.start[1];
  label(); show(query);
})();
"""


class AttentionViewer(Markup):
    """The viewer's self-contained HTML fragment; it renders itself in Jupyter, and ``.html`` is
    a whole page around it.

    >>> viewer = AttentionViewer("<b>v</b>")
    >>> viewer._repr_html_(), str(viewer)
    ('<b>v</b>', '<b>v</b>')
    >>> viewer.html.startswith("<!doctype html>") and viewer.html.endswith("</html>")
    True
    """

    @property
    def html(self) -> str:
        """A whole HTML page holding the viewer (it fetches nothing)."""
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>ihprobe attention viewer</title></head>"
            f"<body>{self}</body></html>"
        )

    def save(self, path) -> None:
        """Write :attr:`html` to ``path``."""
        from ihprobe.core.files import atomic_write

        atomic_write(path, self.html)

    def _repr_html_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"<AttentionViewer: {len(self):,} characters of HTML>"


def attention_viewer(
    model,
    tokens: Int[torch.Tensor, " pos"],
    *,
    layers: Sequence[int] | None = None,
    start: tuple[int, int] | None = None,
    title: str = "",
    fv=None,
    prefix: torch.Tensor | None = None,
) -> AttentionViewer:
    """A self-contained HTML fragment: choose layer and head, hover a token to see its attention.

    Args:
        tokens: one row of token ids.
        layers: layers to include (all by default; every head of each).
        start: ``(layer, head)`` shown first; default the head with the highest prefix-matching
            score (``ihprobe.scan`` on 20 rows of repeated random tokens).
        fv: an :class:`~ihprobe.causal.fv_result.FVResult` or its ``to_frame()``: each head's
            FV score is shown in the head picker beside its prefix matching.
        prefix: ``[layer, head]`` prefix-matching scores for the picker; computed as for
            ``start`` when ``fv`` is given without them.

    Example:
        >>> page = attention_viewer(model, repeated[0], start=(1, 2))      # doctest: +SKIP
        >>> page = attention_viewer(model, prompt, fv=ihprobe.fv_scores(model))  # doctest: +SKIP
    """
    model = as_model(model)
    cfg = checks.model(model).cfg
    checks.tokens("tokens", tokens, model, dims=(1,))
    grid, prefix, start = _picker_scores(model, fv, prefix, start)
    pick = range(cfg.n_layers) if layers is None else checks.sequence("layers", layers)
    layers = [checks.count("layers", i, low=0, high=cfg.n_layers - 1) for i in pick]
    patterns = attention_patterns(model, tokens, layers)
    start_index = (layers.index(start[0]) if start[0] in layers else 0, start[1])
    data = {
        "tokens": token_labels(model, tokens),
        "layers": layers,
        "heads": list(range(patterns.shape[1])),
        "start": start_index,
        "patterns": patterns.double().round(decimals=3).tolist(),  # 0.039, not 0.0390000008
        "labels": head_labels(layers, cfg.n_heads, prefix, grid) if grid is not None else None,
    }
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")  # no </script>, <!--
    element = _element_id(payload + title)
    heading = f"<p><b>{html.escape(title)}</b></p>" if title else ""
    return AttentionViewer(
        f"<style>{_STYLE}</style>"
        f'<div class="ihp-viewer" id="{element}">{heading}'
        '<select class="ihp-layer"></select><select class="ihp-head"></select>'
        '<span class="ihp-info"></span>'
        '<div class="ihp-body"><div class="ihp-tokens"></div><div class="ihp-matrix">'
        '<div class="ihp-xlabel">key position (attended to) &rarr;</div>'
        '<div class="ihp-ylabel">query position (attending) &rarr;</div><canvas></canvas>'
        "</div></div>"
        f'<script type="application/json">{payload}</script></div>'
        f"<script>{_SCRIPT % {'id': json.dumps(element)}}</script>"
    )


def _picker_scores(model, fv, prefix, start):
    """``(fv grid or None, prefix scores or None, start head)``, checked against the model."""
    cfg = model.cfg
    grid = None if fv is None else fv_grid(fv)
    if grid is not None and tuple(grid.shape) != (cfg.n_layers, cfg.n_heads):
        raise IhprobeError(
            f"fv scores {tuple(grid.shape)} heads, the model has {(cfg.n_layers, cfg.n_heads)}; "
            "pass the FV scores of this model."
        )
    if prefix is None and (grid is not None or start is None):
        prefix = prefix_scores(model)
    if start is None:
        start = divmod(int(torch.argmax(prefix)), cfg.n_heads)
    return grid, prefix, checks.heads("start", [start], cfg.n_layers, cfg.n_heads)[0]


def head_labels(layers: list[int], n_heads: int, prefix, fv) -> list[list[str]]:
    """The head picker's text for each head of each shown layer: its prefix matching (PS) and
    its FV score beside its number (``n/a`` where no task is above chance).

    >>> head_labels([0], 2, torch.tensor([[0.91, 0.1]]), torch.tensor([[0.4, float("nan")]]))
    [['head 0 · PS 0.91 · FV +0.400', 'head 1 · PS 0.10 · FV n/a']]
    """
    labels = []
    for layer in layers:
        row = []
        for head in range(n_heads):
            score = float(fv[layer, head])
            shown = "n/a" if math.isnan(score) else f"{score:+.3f}"
            row.append(f"head {head} · PS {float(prefix[layer, head]):.2f} · FV {shown}")
        labels.append(row)
    return labels


def prefix_scores(model) -> torch.Tensor:
    """Every head's prefix-matching score ``[layer, head]`` (20 rows of repeated random tokens).

    Example:
        >>> prefix_scores(model).shape                                   # doctest: +SKIP
        torch.Size([2, 4])
    """
    return scan(model, ["prefix_matching"], batch=20).head["prefix_matching"].detach().cpu()


_RENDERED = itertools.count()  # viewers made in this process, so equal data get distinct ids


def _element_id(content: str) -> str:
    """A page-unique id that a re-run reproduces: a hash of the content and the viewer's number
    in this process (a notebook re-executed top to bottom gets the same ids).

    >>> _element_id("x") == _element_id("x")
    False
    """
    digest = hashlib.sha256(content.encode()).hexdigest()[:8]
    return f"ihp-view-{digest}-{next(_RENDERED)}"
