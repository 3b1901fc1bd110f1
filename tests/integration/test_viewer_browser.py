"""The attention viewer in headless Chromium: after switching layers and heads and hovering
tokens and heatmap rows, its canvas is pixel for pixel a fresh draw of the head it shows (it
redraws from a cleared canvas, nothing of the previous head or outline shows through); and the
object ``attention_viewer`` returns renders in Jupyter and is the HTML string."""

from __future__ import annotations

import itertools
import re

import pytest

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.figures import viewer as viewer_module
from ihprobe.figures.viewer import AttentionViewer, attention_viewer
from ihprobe.probes.inputs import repeated_tokens
from tests.browser import render, screenshot
from tests.helpers import save_checkpoint, tiny_hf_model

# Compares the canvases of the viewers on the page: the first is a fresh draw; every other one
# is driven to the same layer, head and query through `steps` first.
_DRIVE = """<script>
window.addEventListener('load', () => {
  const views = [...document.querySelectorAll('.ihp-viewer')];
  const pick = (v, cls, value) => {
    const s = v.querySelector(cls); s.value = value; s.dispatchEvent(new Event('change'));
  };
  const hoverToken = (v, i) => v.querySelectorAll('.ihp-tok')[i]
    .dispatchEvent(new Event('mouseenter'));
  const hoverRow = (v, q) => {
    const c = v.querySelector('canvas'), r = c.getBoundingClientRect();
    const cell = c.height / v.querySelectorAll('.ihp-tok').length;
    c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 2,
                                                  clientY: r.top + q * cell + cell / 2}));
  };
  const steps = %(steps)s;
  views.slice(1).forEach(v => steps.forEach(([kind, a, b]) =>
    kind === 'head' ? (pick(v, '.ihp-layer', a), pick(v, '.ihp-head', b))
    : kind === 'token' ? hoverToken(v, a) : hoverRow(v, a)));
  const pixels = v => { const c = v.querySelector('canvas');
    return c.getContext('2d').getImageData(0, 0, c.width, c.height).data; };
  const fresh = pixels(views[0]);
  const diffs = views.slice(1).map(v => {
    const p = pixels(v); let n = 0;
    for (let i = 0; i < p.length; i++) if (p[i] !== fresh[i]) n++;
    return n;
  });
  document.documentElement.setAttribute('data-diffs', JSON.stringify(diffs));
});
</script>"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("viewer")
    model = tiny_hf_model("gpt2", vocab_size=64, heads=4, context=32, seed=1)
    return ihprobe.load(save_checkpoint(model, directory, id_tokenizer(64)))


def _diffs(tmp_path, viewers: list[str], steps: list) -> list[int]:
    import json

    page = tmp_path / "viewer.html"
    body = "".join(viewers) + _DRIVE % {"steps": json.dumps(steps)}
    page.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
        encoding="utf-8",
    )
    rendered = render(page)
    assert rendered.errors == []
    return json.loads(
        re.search(r"data-diffs=\"([^\"]*)\"", rendered.dom).group(1).replace("&quot;", '"')
    )


@pytest.mark.slow
def test_switching_heads_and_hovering_leaves_a_fresh_draw(model, tmp_path):
    tokens = repeated_tokens(model, n=12, batch=1, seed=1)[0]
    last = len(tokens) - 1
    fresh = attention_viewer(model, tokens, start=(1, 1))
    steps = [
        ["head", 0, 2],
        ["token", 3],
        ["row", 9],
        ["head", 1, 3],
        ["token", 17],
        ["head", 1, 1],
        ["row", 5],
        ["token", 20],
        ["token", last],
    ]
    driven = [attention_viewer(model, tokens, start=start) for start in ((0, 0), (1, 1))]
    assert _diffs(tmp_path, [fresh, *driven], steps) == [0, 0]
    # the comparison can fail: another head, or another hovered query, differs
    other = attention_viewer(model, tokens, start=(0, 0))
    moved = attention_viewer(model, tokens, start=(1, 1))
    head_diff, query_diff = (
        _diffs(tmp_path, [fresh, other], []),
        _diffs(tmp_path, [fresh, moved], [["token", 5]]),
    )
    assert head_diff[0] > 1000 and query_diff[0] > 0
    screenshot(tmp_path / "viewer.html", "viewer.png", height=700)


def test_the_viewer_renders_in_jupyter_and_is_its_html_string(model):
    tokens = repeated_tokens(model, n=8, batch=1, seed=1)[0]
    viewer = attention_viewer(model, tokens, start=(1, 2))
    assert isinstance(viewer, AttentionViewer) and isinstance(viewer, str)
    assert viewer._repr_html_() == str(viewer) and str(viewer).startswith("<style>")
    page = viewer.html  # a whole page around the fragment a report embeds
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert str(viewer) in page and "<title>" in page
    assert "key position" in viewer and "query position" in viewer  # the pattern's axes
    assert repr(viewer).startswith("<AttentionViewer: ") and len(repr(viewer)) < 80


def test_viewer_ids_differ_on_a_page_and_repeat_when_the_notebook_reruns(model, monkeypatch):
    tokens = repeated_tokens(model, n=8, batch=1, seed=1)[0]

    def ids_of_two_equal_viewers():
        html = attention_viewer(model, tokens) + attention_viewer(model, tokens)
        return re.findall(r'id="(ihp-view-[^"]+)"', html)

    monkeypatch.setattr(viewer_module, "_RENDERED", itertools.count())
    first, second = ids_of_two_equal_viewers()
    assert first != second  # the same data twice on one page: each script finds its own
    monkeypatch.setattr(viewer_module, "_RENDERED", itertools.count())  # a fresh kernel
    assert ids_of_two_equal_viewers() == [first, second]


def test_the_viewer_opens_on_the_top_head_and_saves_a_page(model, tmp_path):
    """By default the viewer opens on the head ``scan`` ranks first by prefix matching; a
    ``start`` overrides it; ``save`` writes the whole page."""
    tokens = repeated_tokens(model, n=8, batch=1, seed=1)[0]
    layer, head, _ = ihprobe.scan(model, ["prefix_matching"], batch=20).top_heads(k=1)[0]
    assert f'"start":[{layer},{head}]' in attention_viewer(model, tokens)
    other = (layer, (head + 1) % model.cfg.n_heads)
    assert f'"start":[{other[0]},{other[1]}]' in attention_viewer(model, tokens, start=other)
    viewer = attention_viewer(model, tokens)
    viewer.save(tmp_path / "v.html")
    assert (tmp_path / "v.html").read_text(encoding="utf-8") == viewer.html


# Records the head picker's option texts on load, then on layer 0 and back on the first layer.
_PICKER = """<script>
window.addEventListener('load', () => {
  const v = document.querySelector('.ihp-viewer'), layer = v.querySelector('.ihp-layer');
  const texts = () => [...v.querySelector('.ihp-head').options].map(o => o.text);
  const seen = [texts()];
  const pick = value => { layer.value = value; layer.dispatchEvent(new Event('change')); };
  pick(0); seen.push(texts()); pick(1); seen.push(texts());
  document.documentElement.setAttribute('data-picker', JSON.stringify(seen));
});
</script>"""


@pytest.mark.slow
def test_the_head_picker_shows_each_layers_fv_beside_prefix_matching(tmp_path):
    """In Chromium, as a user sees it: the picker lists every head of the shown layer with its
    prefix matching and FV score, and switching layers relabels it with that layer's scores."""
    import json

    from ihprobe.causal.tasks import Task
    from ihprobe.figures.viewer import prefix_scores
    from tests.planted_fv import FV_HEAD, PAIRS, save_planted

    planted = ihprobe.load(save_planted(tmp_path / "planted"))
    result = ihprobe.fv_scores(planted, [Task("planted", PAIRS)], shots=5, prompts=8)
    prompt = result.tasks[0].clean
    tokens = prompt.tokens[0, : int(prompt.last[0]) + 1]
    viewer = attention_viewer(planted, tokens, start=FV_HEAD, fv=result)
    page = tmp_path / "picker.html"
    page.write_text(viewer.html.replace("</body>", _PICKER + "</body>"), encoding="utf-8")
    rendered = render(page)
    assert rendered.errors == []
    found = re.search(r"data-picker=\"([^\"]*)\"", rendered.dom).group(1)
    on_load, layer0, layer1 = json.loads(found.replace("&quot;", '"'))
    prefix, fv = prefix_scores(planted), result.scores

    def expected(layer):
        return [
            f"head {h} · PS {float(prefix[layer, h]):.2f} · FV {float(fv[layer, h]):+.3f}"
            for h in range(planted.cfg.n_heads)
        ]

    assert on_load == layer1 == expected(FV_HEAD[0]) and layer0 == expected(0)
    assert layer0 != layer1  # the labels follow the layer
    # the selected option shows in the closed picker: the top FV head's scores
    assert f"FV {float(fv[FV_HEAD]):+.3f}" in on_load[FV_HEAD[1]]
    screenshot(page, "viewer-fv-picker.png", height=700)
