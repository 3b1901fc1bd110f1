"""The HTML report renders in a real browser: every figure draws, no JavaScript errors."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ihprobe.report import Section, write_report
from tests.browser import render, screenshot


def test_report_is_self_contained_and_renders(tmp_path):
    figures = [go.Figure(go.Heatmap(z=[[0, 1], [1, 0]])), go.Figure(go.Scatter(y=[1, 3, 2]))]
    path = write_report(
        tmp_path / "report.html",
        "Test report",
        [
            Section("Numbers", ["Some prose.", pd.DataFrame({"a": [1.23456, 2.0]})]),
            Section("Figures", figures),
        ],
    )
    page = path.read_text()
    assert "<script src=" not in page  # plotly.js inline: opens with no network
    assert page.count("plotly.js v") == 1  # embedded once, not per figure
    rendered = render(path)
    assert rendered.errors == []
    assert rendered.count(r'class="main-svg"') >= len(figures)
    assert "1.235" in rendered.dom


def test_broken_script_is_caught(tmp_path):
    """The browser check itself can fail: a page that throws is reported."""
    path = write_report(tmp_path / "bad.html", "Bad", [Section("x", ["<script>nope(</script>"])])
    assert render(path).errors


def test_screenshot_artifact(tmp_path):
    path = write_report(tmp_path / "r.html", "Shot", [Section("f", [go.Figure(go.Bar(y=[1]))])])
    png = screenshot(path, "report-smoke.png", height=800)
    assert png.read_bytes()[:4] == b"\x89PNG"
