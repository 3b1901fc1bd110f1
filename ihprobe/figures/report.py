"""Self-contained HTML reports: sections of prose, tables and plotly figures in one file.

plotly.js is embedded once, inline, so a report opens anywhere with no network.

>>> import plotly.graph_objects as go
>>> page = html_page("Demo", [Section("A figure", [go.Figure(go.Bar(y=[1, 2]))])])
>>> "<script src=" in page  # plotly.js is inline, not fetched
False
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from ihprobe.core.files import PAGE_MARK, atomic_write

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem;
border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; font-size: .8rem; margin: .6rem 0; }
.table { max-width: 100%; overflow-x: auto; } .figure { max-width: 100%; overflow-x: auto; }
.howto { background: #f7f9fc; border-left: 3px solid #8aa4c8; padding: .3rem .8rem;
         font-size: .88rem; margin: .6rem 0; } .howto dt { font-weight: 600; }
.howto dd { margin: 0 0 .3rem 1rem; } .verdict { font-size: 1.05rem; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.note { color: #555; font-size: .9rem; } .figure { margin: .8rem 0; }
code { background: #f4f4f4; padding: 0 .2rem; }
"""


class Markup(str):
    """HTML that ihprobe composed, every string of the user's in it already escaped; any other
    ``str`` given to a report is text, and is escaped where it is shown.

    >>> blocks = [Markup("<p>ok</p>"), "<img src=x onerror=alert(1)>"]
    >>> page = html_page("t", [Section("s", blocks)])
    >>> page.count("<img"), "<p>ok</p>" in page
    (0, True)
    """

    __slots__ = ()


@dataclass
class Section:
    """A titled part of a report: paragraphs (text, escaped; or :class:`Markup`), tables and
    figures, in order."""

    title: str
    blocks: list = field(default_factory=list)


def how_to_read(terms: dict[str, str]) -> str:
    """A "How to read this" box: every number's name and what it means.

    Example:
        >>> "<dt>p</dt>" in how_to_read({"p": "a permutation p-value"})
        True
    """
    items = "".join(f"<dt>{name}</dt><dd>{text}</dd>" for name, text in terms.items())
    return Markup(f'<div class="howto"><b>How to read this</b><dl>{items}</dl></div>')


def html_page(title: str, sections: list[Section], subtitle: str = "") -> str:
    """Render ``sections`` into one HTML document with plotly.js embedded once; the title, the
    section titles, every text block, the subtitle and every table cell are escaped (only
    :class:`Markup` is not)."""
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8">{PAGE_MARK}',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if subtitle:
        parts.append(f'<p class="note">{_shown(subtitle)}</p>')
    js_done = False
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Markup):
                parts.append(block if block.lstrip().startswith("<") else f"<p>{block}</p>")
            elif isinstance(block, str):
                parts.append(f"<p>{html.escape(block)}</p>")
            elif isinstance(block, pd.DataFrame):
                table = block.to_html(
                    index=False, float_format=lambda v: f"{v:.4g}", border=0, na_rep=""
                )
                parts.append(f'<div class="table">{table}</div>')
            elif block is not None:  # a plotly figure, sized to the page width
                parts.append('<div class="figure">')
                parts.append(_fitted_html(block, include_plotlyjs=not js_done))
                parts.append("</div>")
                js_done = True
    parts.append("</body></html>")
    return "\n".join(parts)


def _fitted_html(figure, *, include_plotlyjs: bool) -> str:
    """The figure's HTML sized to the page width. A ``go.Figure`` is resized in place and put
    back afterwards: copying it (``go.Figure(figure)``) validates every trace again, which was
    most of the time ``ihprobe scan`` spent writing its heatmaps."""
    figure = figure if isinstance(figure, go.Figure) else go.Figure(figure)
    width, autosize = figure.layout.width, figure.layout.autosize
    figure.update_layout(width=None, autosize=True)
    try:
        return figure.to_html(
            full_html=False,
            include_plotlyjs=include_plotlyjs,
            config={"displaylogo": False, "responsive": True},
            default_width="100%",
        )
    finally:
        figure.update_layout(width=width, autosize=autosize)


def _shown(text: str) -> str:
    return text if isinstance(text, Markup) else html.escape(text)


def write_report(
    path: str | os.PathLike, title: str, sections: list[Section], subtitle: str = ""
) -> Path:
    """Write the report atomically (temporary file + rename) and return its path."""
    return atomic_write(path, html_page(title, sections, subtitle))
