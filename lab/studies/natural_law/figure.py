"""Observed against predicted onset in tokens, as a dependency-free SVG: placed runs as dots,
censored runs as arrows up from their bound (the onset lies above), and the line y = x.

>>> svg = onset_svg([(1e7, 8e6, False), (2e7, 4e7, True)])
>>> svg.startswith("<svg") and svg.count("<circle") == 1 and svg.count("<path") == 1
True
"""

from __future__ import annotations

import math

SIZE, PAD = 420, 60


def _scale(low: float, high: float):
    span = math.log10(high) - math.log10(low)
    return lambda v: PAD + (math.log10(v) - math.log10(low)) / span * (SIZE - 2 * PAD)


def onset_svg(points: list[tuple[float, float, bool]], title: str = "") -> str:
    """``points``: (predicted tokens, observed tokens or the censored bound, censored)."""
    values = [v for p, o, _ in points for v in (p, o)] or [1e6, 1e8]
    low = 10 ** math.floor(math.log10(min(values)))
    high = 10 ** math.ceil(math.log10(max(values) * 2))
    at = _scale(low, high)
    flip = lambda v: SIZE - at(v)  # noqa: E731  (SVG's y grows downward)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{SIZE}" height="{SIZE}" fill="white"/>',
        f'<text x="{SIZE / 2}" y="18" text-anchor="middle">{title}</text>',
        f'<line x1="{at(low)}" y1="{flip(low)}" x2="{at(high)}" y2="{flip(high)}" '
        'stroke="#999" stroke-dasharray="4 3"/>',
    ]
    decade = low
    while decade <= high:
        x, y = at(decade), flip(decade)
        label = f"{decade / 1e6:g}M"
        out += [
            f'<line x1="{x}" y1="{SIZE - PAD}" x2="{x}" y2="{SIZE - PAD + 4}" stroke="black"/>',
            f'<text x="{x}" y="{SIZE - PAD + 16}" text-anchor="middle">{label}</text>',
            f'<line x1="{PAD - 4}" y1="{y}" x2="{PAD}" y2="{y}" stroke="black"/>',
            f'<text x="{PAD - 6}" y="{y + 4}" text-anchor="end">{label}</text>',
        ]
        decade *= 10
    out += [
        f'<rect x="{PAD}" y="{PAD}" width="{SIZE - 2 * PAD}" height="{SIZE - 2 * PAD}" '
        'fill="none" stroke="black"/>',
        f'<text x="{SIZE / 2}" y="{SIZE - 18}" text-anchor="middle">predicted onset '
        "(tokens, [A]'s law)</text>",
        f'<text x="16" y="{SIZE / 2}" text-anchor="middle" transform="rotate(-90 16 '
        f'{SIZE / 2})">observed onset (tokens)</text>',
    ]
    for predicted, observed, censored in points:
        x, y = at(predicted), flip(observed)
        if censored:
            out.append(
                f'<path d="M{x} {y} L{x} {y - 22} M{x - 4} {y - 15} L{x} {y - 22} '
                f'L{x + 4} {y - 15}" stroke="#c33" fill="none" stroke-width="1.5"/>'
            )
        else:
            out.append(f'<circle cx="{x}" cy="{y}" r="4" fill="#36c"/>')
    return "\n".join([*out, "</svg>", ""])
