"""``ihprobe composition`` and ``ihprobe patch`` on a tiny checkpoint; the attention viewer in
headless Chromium, interactive and with no network request; bad input exits 2 with one line."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

import ihprobe
from ihprobe.circuit.pairs import induction_pair
from ihprobe.cli import main
from ihprobe.figures.report import Markup, Section, write_report
from ihprobe.figures.viewer import attention_viewer
from tests import browser
from tests.helpers import save_checkpoint, tiny_hf_model

VOCAB = 128


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from ihprobe.core.standin import id_tokenizer

    directory = tmp_path_factory.mktemp("ckpt")
    return save_checkpoint(
        tiny_hf_model("gpt-neox", vocab_size=VOCAB, context=64), directory, id_tokenizer(VOCAB)
    )


@pytest.mark.slow  # headless Chromium, twice
def test_viewer_renders_offline_and_follows_the_hovered_token(checkpoint, tmp_path):
    model = ihprobe.load(checkpoint)
    row = induction_pair(model, n=10, batch=1).clean[0]
    fragment = attention_viewer(model, row, start=(1, 2))
    hover = Markup(  # the test's own script, not text
        "<script>document.querySelectorAll('.ihp-tok')[7]"
        ".dispatchEvent(new Event('mouseenter'));</script>"
    )
    page = write_report(tmp_path / "viewer.html", "viewer", [Section("v", [fragment, hover])])
    assert not re.search(r"(src|href)=[\"']?https?:", page.read_text())
    rendered = browser.render(page)
    assert rendered.errors == []
    assert rendered.count(r'class="ihp-tok[ "]') == 20  # one span per token
    assert rendered.count(r"<option") == 2 + 4  # layers, heads
    assert re.search(r'class="ihp-info">query 7 ', rendered.dom)  # the hovered token
    shaded = re.findall(r'class="ihp-tok[^"]*" [^>]*style="background: rgba', rendered.dom)
    assert len(shaded) == 8  # the query and the 7 tokens before it, none after
    assert browser.network_requests(page) == []
    control = tmp_path / "control.html"  # the same check sees a page that does fetch
    control.write_text(
        '<html><head></head><body><img src="http://127.0.0.1:9/x.png"></body></html>'
    )
    assert browser.network_requests(control) == ["http://127.0.0.1:9/x.png"]


def test_composition_cli_writes_csv_and_report(checkpoint, tmp_path, capsys):
    out = tmp_path / "comp"
    assert main(["composition", str(checkpoint), "--out", str(out), "--draws", "20"]) == 0
    frame = pd.read_csv(out / "composition.csv")
    values, raw = frame[frame.statistic.isna()], frame[frame.statistic == "raw"]
    assert sorted(values.metric.unique()) == ["k_composition", "q_composition", "v_composition"]
    assert len(values) == len(raw) == 3 * 16
    baseline = raw.value.to_numpy() - values.value.to_numpy()
    assert abs(baseline - baseline[0]).max() < 1e-12  # one baseline
    assert "K L0H" in capsys.readouterr().out
    rendered = browser.render(out / "composition.html")
    assert rendered.errors == [] and rendered.count(r'class="main-svg"') >= 3
    assert main(["composition", str(checkpoint), "--out", str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err


@pytest.mark.slow
def test_patch_cli_writes_tables_and_a_report_that_opens_offline(checkpoint, tmp_path, capsys):
    out = tmp_path / "patch"
    argv = ["patch", str(checkpoint), "--out", str(out), "--batch", "4", "--n", "12"]
    assert main(argv) == 0
    frame = pd.read_csv(out / "patch.csv")
    frame = frame[frame.statistic.isna()]  # the patched values; fractions are their own rows
    assert sorted(frame.metric.unique()) == ["activation_patch", "attribution_patch"]
    assert len(frame) == 2 * 8  # 2 layers x 4 heads, per method
    path = pd.read_csv(out / "path.csv")
    path = path[path.statistic.isna()]
    assert path.input.tolist() == ["q", "k", "v"] and (path.sender_layer == 0).all()
    assert "restores" in capsys.readouterr().out
    rendered = browser.render(out / "patch.html")
    assert rendered.errors == []
    assert rendered.count(r'class="ihp-tok[ "]') == 24 and "Attention viewer" in rendered.dom
    assert browser.network_requests(out / "patch.html") == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["patch", "{ckpt}", "--sender", "one"], "--sender is written L1H3 or 1.3"),
        (
            ["patch", "{ckpt}", "--sender", "0.9", "--receiver", "1.0"],
            "sender head must be an integer from 0 to 3",
        ),
        (["patch", "{ckpt}", "--sender", "1.0", "--receiver", "1.1"], "earlier layer"),
        (["composition", "{missing}"], "{missing}"),
    ],
)
def test_bad_input_exits_2_with_one_line(checkpoint, tmp_path, capsys, argv, message):
    names = {"ckpt": str(checkpoint), "missing": str(tmp_path / "nothing")}
    argv = [a.format(**names) for a in argv] + ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    # a loaded machine can show a stage line ("ihprobe patch: 5 s, loading ...") before an
    # error found after loading; the error itself is one line
    stage = re.compile(r"ihprobe \w+: \d+ s, ")
    err = "\n".join(line for line in err.splitlines() if not stage.match(line))
    assert len(err.splitlines()) == 1 and message.format(**names) in err
    assert "Traceback" not in err
    assert json.dumps(err)  # printable


def test_patch_cli_choices_are_the_librarys():
    from ihprobe.circuit.patching import PER
    from ihprobe.cli import build_parser

    patch = build_parser()._subparsers._group_actions[0].choices["patch"]
    per = next(a for a in patch._actions if "--per" in a.option_strings)
    assert tuple(per.choices) == PER  # the CLI keeps its copy torch-free; this keeps it true
