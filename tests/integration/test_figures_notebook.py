"""The notebooks' PNG renderer never stalls a notebook: a browser that does not answer costs
one bounded wait, one warning, and interactive-only figures from then on."""

from __future__ import annotations

import base64
import logging
import threading
import time

import plotly.graph_objects as go
import plotly.io._base_renderers as base_renderers

from ihprobe.figures.notebook import BoundedPngRenderer

FIGURE = go.Figure(go.Bar(y=[1, 2])).to_dict()


def test_an_image_that_comes_back_is_shown(monkeypatch):
    monkeypatch.setattr(base_renderers, "to_image", lambda fig, **_: b"\x89PNG fake")
    bundle = BoundedPngRenderer(timeout_s=5).to_mimebundle(FIGURE)
    assert base64.b64decode(bundle["image/png"]) == b"\x89PNG fake"


def test_a_browser_that_never_answers_costs_one_bounded_wait(monkeypatch, caplog):
    release, calls = threading.Event(), []

    def hangs(fig, **_):
        calls.append(fig)
        release.wait()  # what kaleido does when its browser thread has died
        return b"too late"

    monkeypatch.setattr(base_renderers, "to_image", hangs)
    renderer = BoundedPngRenderer(timeout_s=0.3)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        assert renderer.to_mimebundle(FIGURE) == {}
        assert renderer.to_mimebundle(FIGURE) == {}  # the next figure does not wait again
    release.set()
    assert time.perf_counter() - start < 3
    assert len(calls) == 1
    assert "no image after 0.3 s" in caplog.text
    assert caplog.text.count("without static images") == 1


def test_a_failing_image_is_left_out_with_its_reason(monkeypatch, caplog):
    def fails(fig, **_):
        raise RuntimeError("Chrome not found")

    monkeypatch.setattr(base_renderers, "to_image", fails)
    with caplog.at_level(logging.WARNING):
        assert BoundedPngRenderer(timeout_s=5).to_mimebundle(FIGURE) == {}
    assert "RuntimeError: Chrome not found" in caplog.text
