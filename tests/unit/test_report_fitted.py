"""A report sizes each figure to the page without copying it, and leaves the caller's figure as
it was."""

from __future__ import annotations

import plotly.graph_objects as go

from ihprobe.figures.report import Section, html_page


def test_a_figure_is_fitted_to_the_page_and_put_back():
    figure = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])).update_layout(width=517, height=300)
    before = figure.to_dict()
    page = html_page("t", [Section("s", [figure, {"data": [], "layout": {"width": 611}}])])
    assert figure.to_dict() == before  # width 517 and no autosize, as given
    assert '"autosize":true' in page and '"height":300' in page
    assert '"width":517' not in page and '"width":611' not in page  # a dict figure too
